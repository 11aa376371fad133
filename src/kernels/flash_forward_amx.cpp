// The fused attention forward with bf16 products on packed tiles — AMX's (amx_tiles.hpp), or on
// CPUs without AMX, AVX-512 BF16's vdpbf16ps on the same operands (dpbf16_tiles.hpp; which one:
// FlashProblem::amx_tiles). The algorithm of flash_forward.cpp for one task — a block of up to
// kQueryBlock queries of one head against the keys in blocks of kKeyBlock, the online softmax
// (online_softmax-inl.h), the masks and variants — with its two products on the tiles instead
// of the FMA units:
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
// P's 2^x is Exp2ForBfloat16's shorter polynomial (2.9e−6, against the 2^−9 of P's rounding).
// Only the Highway targets with 16 float lanes (AVX-512) run it; amx_bf16_usable() implies one.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/kernels/amx_tiles.hpp"
#include "src/kernels/block_visibility.hpp"
#include "src/kernels/dpbf16_tiles.hpp"
#include "src/kernels/flash_forward.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/flash_forward_amx.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"
// Must come after tile_product-inl.h.
#include "src/kernels/amx_packing-inl.h"
#include "src/kernels/mask_block-inl.h"
#include "src/kernels/online_softmax-inl.h"
#include "src/kernels/score_variants-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

#if ATTN_AVX512_TARGET  // the tiles are 16 floats wide, as the vectors here

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

// O's rows from Oᵀ (dv × ldq, padded to 16 rows): out[r·ld + e] = ot[e·ldq + r]·inverse[r] for
// r < rows, e < dv, by 16 × 16 blocks transposed in registers (the element-by-element loop it
// replaces was 3.5 % of the causal forward at T = 1024). The same products, so the same bits.
// Into bfloat16 words (Element uint16_t), each rounded to nearest even as it is stored.
template <class Element>
void WriteOutputRows(const float* ot, size_t ldq, size_t rows, size_t dv, const float* inverse,
                     Element* out, size_t ld) {
  const DF df;
  for (size_t r0 = 0; r0 < rows; r0 += kTile) {
    for (size_t e0 = 0; e0 < dv; e0 += kTile) {
      __m512 x[16];
      for (size_t i = 0; i < 16; ++i) x[i] = _mm512_loadu_ps(ot + (e0 + i) * ldq + r0);
      Transpose16x16(x);  // x[j]: O's row r0 + j, columns e0 …
      const auto columns = static_cast<__mmask16>((1u << std::min<size_t>(kTile, dv - e0)) - 1);
      for (size_t j = 0; j < kTile && r0 + j < rows; ++j) {
        const __m512 row = _mm512_mul_ps(x[j], _mm512_set1_ps(inverse[r0 + j]));
        if constexpr (std::is_same_v<Element, uint16_t>) {
          _mm256_mask_storeu_epi16(out + (r0 + j) * ld + e0, columns,
                                   Bfloat16Words(df, VF{row}).raw);
        } else {
          _mm512_mask_storeu_ps(out + (r0 + j) * ld + e0, columns, row);
        }
      }
    }
  }
}

// SoftmaxUpdate and PackKeyPairs in one pass: each query vector's probabilities go straight
// into the pair words of P that Oᵀ += Vᵀ·Pᵀ reads (rounded to bfloat16; l sums them
// unrounded, as SoftmaxUpdate does, in the same order), instead of into Sᵀ and from there,
// in a second pass, into the pairs. chunks: as PackKeyPairs'. score_scale: what the scores in
// st are still to be multiplied by (1 when they are scaled already), folded into the max and
// the exponent's multiply-subtract.
void SoftmaxUpdateToPairs(const DiagonalCut& cut, size_t cols, const float* st, size_t ldq,
                          float score_scale, float* m, float* l, float* alpha, uint32_t* pp,
                          size_t* chunks) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const size_t N = hn::Lanes(df);
  // Later query vectors see more keys (KeysForQueryVector grows with r).
  const size_t all_pairs = round_up(std::min(KeysForQueryVector(cut, ldq - N), cols), kChunk) / 2;
  const VF factor = hn::Set(df, score_scale);
  auto probability = [&](const SoftmaxShift& s, size_t c, size_t r) {
    return Exp2ForBfloat16(df, hn::MulSub(hn::LoadU(df, st + c * ldq + r), factor, s.shift));
  };
  for (size_t r = 0; r < ldq; r += N) {
    const size_t seen = std::min(KeysForQueryVector(cut, r), cols);
    chunks[r / kTile] = round_up(seen, kChunk) / kChunk;
    const SoftmaxShift s = ShiftForBlock(st, ldq, r, seen, m, score_scale);
    VF sum = hn::Zero(df);
    size_t c = 0;
    for (; c + 2 <= seen; c += 2) {
      const VF even = probability(s, c, r), odd = probability(s, c + 1, r);
      sum = hn::Add(hn::Add(sum, even), odd);
      hn::StoreU(RoundedPairWords(even, odd), du, pp + (c / 2) * ldq + r);
    }
    if (c < seen) {  // an odd count: the last pair's upper half is 0
      const VF even = probability(s, c, r);
      sum = hn::Add(sum, even);
      hn::StoreU(RoundedPairWords(even, hn::Zero(df)), du, pp + (c / 2) * ldq + r);
      c += 2;
    }
    for (size_t k = c / 2; k < all_pairs; ++k) hn::StoreU(hn::Zero(du), du, pp + k * ldq + r);
    FinishBlockStep(s, sum, r, m, l, alpha);
  }
}

void FlashForwardBlockAmx(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows_in,
                          float* scratch) {
  const size_t rows = static_cast<size_t>(rows_in);
  const size_t d = static_cast<size_t>(p.d), dv = static_cast<size_t>(p.dv);
  const size_t ldq = round_up(rows, kTile), query_tiles = ldq / kTile;
  const size_t d_pad = static_cast<size_t>(p.amx_keys.row), dv_rows = round_up(dv, kTile);

  // Scratch (flash_forward_scratch_floats sizes it for this layout too).
  auto* qp = reinterpret_cast<uint32_t*>(scratch);  // d_pad / 2 pair-rows × ldq words
  float* st = scratch + round_up(d_pad * kQueryBlockPadded / 2, 16);           // kKeyBlock × ldq
  auto* pp = reinterpret_cast<uint32_t*>(st + kKeyBlock * kQueryBlockPadded);  // pairs × ldq
  float* ot = st + kKeyBlock * kQueryBlockPadded + kKeyBlock * kQueryBlockPadded / 2;
  float* m = ot + round_up(dv_rows * kQueryBlockPadded, 16);
  float* l = m + kQueryBlockPadded;
  float* alpha = l + kQueryBlockPadded;

  const int64_t kv_h = h / (p.heads / p.kv_heads);
  const uint16_t* keys = p.amx_keys.of(b, p.kv_heads, kv_h);
  const uint16_t* values_t = p.amx_values_t.of(b, p.kv_heads, kv_h);
  const auto key_row = static_cast<size_t>(p.amx_keys.row);
  const auto value_row = static_cast<size_t>(p.amx_values_t.row);

  const int64_t q_first = b * p.q_stride[0] + h * p.q_stride[1] + q0 * p.q_stride[2];
  if (p.q_words != nullptr) {
    PackQueryPairs(p.q_words + q_first, p.q_stride[2], rows, d, d_pad, ldq, qp);
  } else {
    PackQueryPairs(p.q + q_first, p.q_stride[2], rows, d, d_pad, ldq, qp);
  }
  std::fill(ot, ot + dv_rows * ldq, 0.0f);
  std::fill(m, m + ldq, kMinusInf);
  std::fill(l, l + ldq, 0.0f);
  size_t key_chunks[kQueryBlockPadded / kTile];

  const KeyRange keys_seen = visible_keys(p, b, q0, rows_in);
  // The scores come out unscaled; where scores_scaled_as_read, the softmax applies the scale as
  // it reads them (the max of the scaled scores is the scaled max): one pass over the block less.
  const float scale2 = p.scale * kLog2e;
  const bool scale_in_softmax = scores_scaled_as_read(p);
  if (p.amx_tiles) amx_begin();
  for (int64_t j0 = keys_seen.begin; j0 < keys_seen.end; j0 += kKeyBlock) {
    const size_t cols = static_cast<size_t>(std::min(kKeyBlock, keys_seen.end - j0));
    const DiagonalCut cut = diagonal_cut(p, q0, rows, j0, cols);
    packed_product(p.amx_tiles, false, keys + j0 * key_row, key_row, round_up(cols, kTile) / kTile,
                   reinterpret_cast<const uint16_t*>(qp), ldq, query_tiles, d_pad / kChunk, nullptr,
                   st, ldq);
    if (!scale_in_softmax) {
      ScaleScores(cut, scale2, st, ldq);
      ScoreVariants(p, h, q0, j0, cut, st, ldq, nullptr);
    }
    MaskBlock(p, b, h, q0, rows, j0, cols, kLog2e, st, ldq);
    SoftmaxUpdateToPairs(cut, cols, st, ldq, scale_in_softmax ? scale2 : 1.0f, m, l, alpha, pp,
                         key_chunks);
    if (j0 != keys_seen.begin) RescaleTransposed(alpha, dv_rows, ldq, ot);  // Oᵀ is 0 before
    packed_product(p.amx_tiles, true, values_t + j0, value_row, dv_rows / kTile,
                   reinterpret_cast<const uint16_t*>(pp), ldq, query_tiles, 0, key_chunks, ot, ldq);
  }
  if (p.amx_tiles) amx_end();

  if (p.sinks != nullptr) {  // the sink's term joins every row's sum
    FoldSink(p.sinks[h] * kLog2e, ldq, m, l, alpha);
    RescaleTransposed(alpha, dv_rows, ldq, ot);
  }
  float* inverse = alpha;
  FinishSums(p, b, h, q0, rows, m, l, inverse);
  const int64_t out_first = b * p.out_stride[0] + h * p.out_stride[1] + q0 * p.out_stride[2];
  const auto out_ld = static_cast<size_t>(p.out_stride[2]);
  if (p.out_words != nullptr) {
    WriteOutputRows(ot, ldq, rows, dv, inverse, p.out_words + out_first, out_ld);
  } else {
    WriteOutputRows(ot, ldq, rows, dv, inverse, p.out + out_first, out_ld);
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
