// The fused attention forward with bf16 products on AMX tiles (amx_tiles.hpp): the algorithm of
// flash_forward.cpp for one task — a block of up to kQueryBlock queries of one head against the
// keys in blocks of kKeyBlock, the online softmax (online_softmax-inl.h), the masks and variants
// — with its two products on the tiles instead of the FMA units:
//   Sᵀ  = K_j · Qᵀ         A = K's bfloat16 rows as packed for the call, B = Q's pairs (below)
//   Oᵀ += V_jᵀ · Pᵀ        A = V transposed as packed for the call,     B = P's pairs
// The tiles' product runs the reduction in pairs (B's pair-row k holds (x[2k], x[2k+1]) for
// each column), so per task Q is packed with its d in pairs, and per key block P with its keys
// in pairs. The output accumulates transposed, Oᵀ (dv × queries): the rescaling between key
// blocks is then a vector of queries' factors per row, and the transpose is paid once, at the
// end. Scores come out unscaled (Q is not pre-scaled: scale·Q would be rounded to bfloat16 once
// more) and are multiplied by scale·log2 e before the masks.
//
// Rounding: the same as the vector kernels' bf16 products (flash_forward.cpp's opening comment
// has the error bound): Q, K, V and P are bfloat16, every product of two is exact, and the
// sums are float32 — in the tiles' order, so the last bits differ from the vector kernels'.
// Only the Highway targets with 16 float lanes (AVX-512) run it; amx_bf16_usable() implies one.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "src/kernels/amx_tiles.hpp"
#include "src/kernels/block_visibility.hpp"
#include "src/kernels/flash_forward.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/flash_forward_amx.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"
// Must come after tile_product-inl.h.
#include "src/kernels/online_softmax-inl.h"
#include "src/kernels/score_variants-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3  // the tiles are 16 floats wide, as the vectors here

constexpr size_t kTile = 16;   // queries per AMX column tile
constexpr size_t kChunk = 32;  // reduction length per tile product

// The top half of a float that holds a bfloat16 value exactly (the operands were rounded).
inline uint16_t BfloatBits(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

// B of Sᵀ = K·Qᵀ: word k of query r holds (Q[r][2k], Q[r][2k + 1]) — the row's bfloat16 pairs,
// as words — at qp[k·ldq + r]: a transpose of the rows' words, by scatter, 32 values of a row
// at a time. Zero past the rows and past d, for the d_pad / 2 pair-rows.
void PackQueryPairs(const float* q, int64_t stride, size_t rows, size_t d, size_t d_pad,
                    size_t ldq, uint32_t* qp) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  const auto high = hn::Set(du, 0xFFFF0000u);
  const auto pair_rows = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(ldq)));
  const size_t vector_part = d / (2 * N) * (2 * N);
  for (size_t r = 0; r < ldq; ++r) {
    const float* row = q + static_cast<int64_t>(r) * stride;
    size_t e = 0;
    for (; r < rows && e < vector_part; e += 2 * N) {
      const auto lo = hn::BitCast(du, hn::LoadU(df, row + e));
      const auto hi = hn::BitCast(du, hn::LoadU(df, row + e + N));
      const auto even = hn::ConcatEven(du, hi, lo), odd = hn::ConcatOdd(du, hi, lo);
      const auto words = hn::Or(hn::And(odd, high), hn::ShiftRight<16>(even));
      hn::ScatterIndex(words, du, qp + (e / 2) * ldq + r, pair_rows);
    }
    for (; e < d_pad; e += 2) {
      const uint32_t even = r < rows && e < d ? BfloatBits(row[e]) : 0;
      const uint32_t odd = r < rows && e + 1 < d ? BfloatBits(row[e + 1]) : 0;
      qp[(e / 2) * ldq + r] = odd << 16 | even;
    }
  }
}

// Sᵀ *= scale·log2 e where the softmax will read it.
void ScaleScores(const DiagonalCut& cut, float scale2, float* st, size_t ldq) {
  const DF df;
  const VF factor = hn::Set(df, scale2);
  ForEachNeededVector(cut, ldq,
                      [&](size_t at) { hn::StoreU(hn::Mul(factor, hn::LoadU(df, st + at)), df, st + at); });
}

// B of Oᵀ += Vᵀ·Pᵀ: the probabilities of keys 2k and 2k + 1 side by side for each query, one
// 32-bit word per (pair-row k, query), from Pᵀ (already rounded to bfloat16 by SoftmaxUpdate).
// chunks[t] = the chunks of 32 keys query tile t needs. A block of two tiles reads as many as
// the later one needs (amx_product), so every tile's pairs are written that far: zero past the
// keys the softmax computed for it.
void PackProbabilityPairs(const DiagonalCut& cut, size_t cols, const float* st, size_t ldq,
                          uint32_t* pp, size_t* chunks) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const size_t N = hn::Lanes(df);
  const auto high = hn::Set(du, 0xFFFF0000u);
  // Later query vectors see more keys (KeysForQueryVector grows with r).
  const size_t all_pairs = round_up(std::min(KeysForQueryVector(cut, ldq - N), cols), kChunk) / 2;
  for (size_t r = 0; r < ldq; r += N) {
    const size_t seen = std::min(KeysForQueryVector(cut, r), cols);
    chunks[r / kTile] = round_up(seen, kChunk) / kChunk;
    for (size_t k = 0; k < all_pairs; ++k) {
      const size_t c = 2 * k;
      const auto even = c < seen ? hn::BitCast(du, hn::LoadU(df, st + c * ldq + r)) : hn::Zero(du);
      const auto odd =
          c + 1 < seen ? hn::BitCast(du, hn::LoadU(df, st + (c + 1) * ldq + r)) : hn::Zero(du);
      hn::StoreU(hn::Or(hn::And(odd, high), hn::ShiftRight<16>(even)), du, pp + k * ldq + r);
    }
  }
}

// Oᵀ[e][r] *= alpha[r].
void RescaleTransposed(const float* alpha, size_t dv_rows, size_t ldq, float* ot) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < ldq; r += N) {
    const VF a = hn::LoadU(df, alpha + r);
    for (size_t e = 0; e < dv_rows; ++e)
      hn::StoreU(hn::Mul(a, hn::LoadU(df, ot + e * ldq + r)), df, ot + e * ldq + r);
  }
}

void FlashForwardBlockAmx(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows_in,
                          float* scratch) {
  const size_t rows = static_cast<size_t>(rows_in);
  const size_t d = static_cast<size_t>(p.d), dv = static_cast<size_t>(p.dv);
  const size_t ldq = round_up(rows, kTile), query_tiles = ldq / kTile;
  const size_t d_pad = static_cast<size_t>(p.amx_key_row), dv_rows = round_up(dv, kTile);

  // Scratch (flash_forward_scratch_floats sizes it for this layout too).
  auto* qp = reinterpret_cast<uint32_t*>(scratch);  // d_pad / 2 pair-rows × ldq words
  float* st = scratch + round_up(d_pad * kQueryBlockPadded / 2, 16);  // kKeyBlock × ldq
  auto* pp = reinterpret_cast<uint32_t*>(st + kKeyBlock * kQueryBlockPadded);  // pairs × ldq
  float* ot = st + kKeyBlock * kQueryBlockPadded + kKeyBlock * kQueryBlockPadded / 2;
  float* m = ot + round_up(dv_rows * kQueryBlockPadded, 16);
  float* l = m + kQueryBlockPadded;
  float* alpha = l + kQueryBlockPadded;

  const int64_t kv_h = h / (p.heads / p.kv_heads);
  const int64_t kv_block = b * p.kv_heads + kv_h;
  const uint16_t* keys = p.amx_keys + kv_block * p.amx_key_head;
  const uint16_t* values_t = p.amx_values_t + kv_block * p.amx_value_head;
  const size_t key_row = static_cast<size_t>(p.amx_key_row);
  const size_t value_row = static_cast<size_t>(p.amx_value_row);

  PackQueryPairs(p.q + b * p.q_stride[0] + h * p.q_stride[1] + q0 * p.q_stride[2], p.q_stride[2],
                 rows, d, d_pad, ldq, qp);
  std::fill(ot, ot + dv_rows * ldq, 0.0f);
  std::fill(m, m + ldq, kMinusInf);
  std::fill(l, l + ldq, 0.0f);
  size_t d_chunks[kQueryBlockPadded / kTile], key_chunks[kQueryBlockPadded / kTile];
  std::fill(std::begin(d_chunks), std::end(d_chunks), d_pad / kChunk);

  const KeyRange keys_seen = visible_keys(p, b, q0, rows_in);
  amx_begin();
  for (int64_t j0 = keys_seen.begin; j0 < keys_seen.end; j0 += kKeyBlock) {
    const size_t cols = static_cast<size_t>(std::min(kKeyBlock, keys_seen.end - j0));
    const DiagonalCut cut = diagonal_cut(p, q0, rows, j0, cols);
    amx_product(false, keys + j0 * key_row, key_row, round_up(cols, kTile) / kTile,
                reinterpret_cast<const uint16_t*>(qp), ldq,
                query_tiles, d_chunks, st, ldq);
    ScaleScores(cut, p.scale * kLog2e, st, ldq);
    ScoreVariants(p, h, q0, j0, cut, st, ldq, nullptr);
    mask_block(p, b, h, q0, rows, j0, cols, kLog2e, st, ldq);
    SoftmaxUpdate(cut, true, st, ldq, m, l, alpha);
    if (j0 != keys_seen.begin) RescaleTransposed(alpha, dv_rows, ldq, ot);  // Oᵀ is 0 before
    PackProbabilityPairs(cut, cols, st, ldq, pp, key_chunks);
    amx_product(true, values_t + j0, value_row, dv_rows / kTile,
                reinterpret_cast<const uint16_t*>(pp), ldq, query_tiles, key_chunks, ot, ldq);
  }
  amx_end();

  if (p.sinks != nullptr) {  // the sink's term joins every row's sum
    FoldSink(p.sinks[h] * kLog2e, ldq, m, l, alpha);
    RescaleTransposed(alpha, dv_rows, ldq, ot);
  }
  float* inverse = alpha;
  FinishSums(p, b, h, q0, rows, m, l, inverse);
  for (size_t r = 0; r < rows; ++r) {
    float* out = p.out + b * p.out_stride[0] + h * p.out_stride[1] +
                 (q0 + static_cast<int64_t>(r)) * p.out_stride[2];
    for (size_t e = 0; e < dv; ++e) out[e] = ot[e * ldq + r] * inverse[r];
  }
}

#else  // narrower vectors (a test may narrow the dispatch): the vector kernel, on p's floats

void FlashForwardBlock(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                       float* scratch);  // flash_forward.cpp, the same target

void FlashForwardBlockAmx(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                          float* scratch) {
  FlashForwardBlock(p, b, h, q0, rows, scratch);
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(FlashForwardBlockAmx);

size_t flash_forward_amx_scratch_floats(const FlashProblem& p) {
  auto up = [](int64_t x, int64_t m) { return static_cast<size_t>((x + m - 1) / m * m); };
  const auto d_pad = static_cast<int64_t>(up(p.d, 32));
  const auto dv_rows = static_cast<int64_t>(up(p.dv, 16));
  return up(d_pad * kQueryBlockPadded / 2, 16) + kKeyBlock * kQueryBlockPadded +
         kKeyBlock * kQueryBlockPadded / 2 + up(dv_rows * kQueryBlockPadded, 16) +
         3 * kQueryBlockPadded;
}

void flash_forward_block_amx(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                             float* scratch) {
  HWY_DYNAMIC_DISPATCH(FlashForwardBlockAmx)(p, b, h, q0, rows, scratch);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
