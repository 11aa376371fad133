// The fused attention forward (FlashAttention-2 style) for one task: a block of up to
// kQueryBlock query rows of one head, against the keys in blocks of kKeyBlock. The Tq × Tk
// score matrix is never built: each key block's scores live in a kQueryBlock × kKeyBlock
// scratch tile, folded into a running max m, sum l and output accumulator o per row:
//   S = (scale·Q_i)·K_jᵀ + mask            (rows × cols)
//   m' = max(m, rowmax S);  P = exp(S − m');  l = e^(m − m')·l + rowsum P
//   o = e^(m − m')·o + P·V_j;  m = m'
//   finally O_i = o / l,  logsumexp_i = m + log l   (l = 0: O = 0, logsumexp = +inf)
// It runs in base 2: S carries a factor log2 e (folded into the scaling of Q, the additive mask
// multiplied by it), so each exp is a 2^x (Exp2Flushed: 6 FMAs instead of 11), and the
// logsumexp handed out is m·ln 2 + log l, in base e as the backward and the API expect.
// Blocks entirely above the causal diagonal (or before a sliding window) are never visited;
// only blocks that cross it are masked element by element. Inside such a block the work above
// the diagonal is skipped at tile granularity (DiagonalCut, block_visibility.hpp): score
// tiles whose queries cannot see their keys, and softmax and P·V terms past the last key a
// group of rows sees. At T = 64 (one block, half of it above the diagonal) that made the
// forward 1.5–2× faster, with the same bits out (the skipped products were of zeros, or of
// scores the mask then discards).
//
// bf16 products (FlashProblem::bf16_products, SdpaOptions::precision): the caller hands Q, K, V
// already rounded to bfloat16, and P is rounded before o += P·V (l sums the unrounded P, so O is
// Σ bf16(P)·V / Σ P). Every sum, the softmax and the rescaling stay float. Here the rounded
// values run through the float tiles, so every CPU gives the same results; CPUs with AMX, or
// with a fast vdpbf16ps, take the same roundings to packed tiles (flash_forward_amx.cpp). Error (u
// = 2^-9, bf16's unit roundoff; A = scale·max Σ_e |q_e·k_e| over the pairs seen): rounding Q and K
// moves a score by ≤ 2u·A, the weights by a factor within e^{±4u·A}; rounding V and P adds ≤
// u·max|V| each: |ΔO| ≤ max|V|·(2u + e^{4u·A} − 1). tests/sdpa_bf16_products_test.cpp checks it
// against float64 and reports the worst element.
//
// SIMD through Highway with runtime dispatch (this file is compiled once per target).
// The scores are computed transposed, Sᵀ = K·(scale·Q)ᵀ, one key per row and the block's
// queries along the vector lanes, because then
//   - K is read in place (its elements are broadcast), so nothing is packed per key block;
//     only Qᵀ is packed, once per task, and reused for every key block;
//   - the softmax max and sum run across keys with the queries in the lanes: plain vector
//     max/add, no horizontal reduction per row.
// Register tiles (tile_product-inl.h): Sᵀ is computed kTileRows keys × kTileVectors vectors of
// queries; o += P·V broadcasts P and loads V rows. With AVX-512 that is 6 × 4 = 24
// accumulators + 4 loads + 1 broadcast of the 32 registers: compute bound. A first version that
// packed Kᵀ per key block and reduced each row horizontally ran at 44 % of the FMA peak on one
// thread (causal T = 4096, H = 16, d = 64); this layout's figures are in docs/performance.md.
//
// Own micro-kernel or oneDNN per block? oneDNN's sgemm on exactly these block products
// (S = Q·Kᵀ 64×64·64×128, O += P·V 64×128·128×64), called in a loop on one thread with
// nothing else, ran at 151–175 GFLOP/s; this kernel reaches 141–155 useful GFLOP/s on one
// thread *including* the online softmax, masking and the rescaling, because its tiles
// produce Sᵀ in the layout the softmax wants and no library call is paid per block. So the
// block products stay here; attn::gemm (oneDNN) serves the large projections.
//
// Block sizes: 64 queries × 128 keys keeps Qᵀ (16 KiB at d = 64), the Sᵀ tile (32 KiB) and
// o (16 KiB) in L2, and the K rows and Qᵀ the inner loop re-reads in L1. Measured with 2
// threads, H = 16, d = 64 (ms, causal T = 256 / causal T = 4096 / non-causal T = 4096):
// 64×64: 0.80 / 118.5 / 225.0; 64×128: 0.70 / 116.7 / 223.9; 128×128: 0.80 / 120.4 / 225.2.
#include "src/kernels/flash_forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "src/kernels/block_visibility.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/flash_forward.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"
// Must come after tile_product-inl.h.
#include "src/kernels/mask_block-inl.h"
#include "src/kernels/online_softmax-inl.h"
#include "src/kernels/score_variants-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// o[r] *= alpha[r] for the rows whose max grew.
void RescaleOutput(const float* alpha, size_t rows, float* o, size_t ldo) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < rows; ++r) {
    if (alpha[r] == 1.0f) continue;
    const VF a = hn::Set(df, alpha[r]);
    float* row = o + r * ldo;
    for (size_t c = 0; c < ldo; c += N) hn::StoreU(hn::Mul(a, hn::LoadU(df, row + c)), df, row + c);
  }
}

// O = o / l, once at the end, with FinishSums' reciprocals (online_softmax-inl.h).
void FinishRows(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, size_t rows,
                const float* o, size_t ldo, const float* m, const float* l, float* inverse) {
  const DF df;
  const size_t N = hn::Lanes(df), dv = static_cast<size_t>(p.dv);
  FinishSums(p, b, h, q0, rows, m, l, inverse);
  for (size_t r = 0; r < rows; ++r) {
    float* out = p.out + b * p.out_stride[0] + h * p.out_stride[1] +
                 (q0 + static_cast<int64_t>(r)) * p.out_stride[2];
    const VF scale = hn::Set(df, inverse[r]);
    size_t e = 0;
    for (; e + N <= dv; e += N)
      hn::StoreU(hn::Mul(hn::LoadU(df, o + r * ldo + e), scale), df, out + e);
    for (; e < dv; ++e) out[e] = o[r * ldo + e] * inverse[r];
  }
}

void FlashForwardBlock(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows_in,
                       float* scratch) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t rows = static_cast<size_t>(rows_in);
  const size_t d = static_cast<size_t>(p.d), dv = static_cast<size_t>(p.dv);
  const size_t ldq = round_up(rows, N);  // queries per row of Qᵀ and Sᵀ
  const size_t ldo = round_up(dv, N);    // o / packed V row length

  // Scratch layout (each piece 64-byte aligned by the 16-float rounding of its size).
  float* qt = scratch;                                   // d × ldq: (scale·Q)ᵀ
  float* st = qt + round_up(d * kQueryBlockPadded, 16);  // kKeyBlock × ldq: Sᵀ, then Pᵀ
  float* vp = st + round_up(kKeyBlock * kQueryBlockPadded, 16);  // kKeyBlock × ldo
  float* o = vp + round_up(kKeyBlock * ldo, 16);                 // rows × ldo
  float* m = o + round_up(kQueryBlock * ldo, 16);  // ldq each: running max, sum, rescale
  float* l = m + kQueryBlockPadded;
  float* alpha = l + kQueryBlockPadded;

  const int64_t kv_h = h / (p.heads / p.kv_heads);
  const float* q = p.q + b * p.q_stride[0] + h * p.q_stride[1] + q0 * p.q_stride[2];
  const float* k = p.k + b * p.k_stride[0] + kv_h * p.k_stride[1];
  const float* v = p.v + b * p.v_stride[0] + kv_h * p.v_stride[1];

  // Qᵀ, pre-scaled (S = K·(scale·Q)ᵀ saves a multiply per score); padding rows are zero. The
  // scale includes log2 e, so the scores, the masks added to them and m are in base 2 and the
  // softmax's exponential is Exp2Flushed, cheaper than a base-e one.
  PackTransposed(q, p.q_stride[2], rows, d, p.scale * kLog2e, qt, ldq);
  std::fill(o, o + rows * ldo, 0.0f);
  std::fill(m, m + ldq, kMinusInf);
  std::fill(l, l + ldq, 0.0f);

  // Key blocks past the causal diagonal, before the window, or in the padding are never visited.
  const KeyRange keys_seen = visible_keys(p, b, q0, rows_in);

  const bool pack_v = dv % N != 0;
  const size_t ldk = static_cast<size_t>(p.k_stride[2]);
  for (int64_t j0 = keys_seen.begin; j0 < keys_seen.end; j0 += kKeyBlock) {
    const size_t cols = static_cast<size_t>(std::min(kKeyBlock, keys_seen.end - j0));
    const DiagonalCut cut = diagonal_cut(p, q0, rows, j0, cols);
    // Sᵀ = K_j · (scale·Q)ᵀ: keys broadcast from K's rows in place; a tile of keys skips the
    // query vectors none of which sees them (MaskBlock sets those lanes to -inf below).
    TileProductFromVector<false>(cut, cols, ldq / N, k + j0 * p.k_stride[2], ldk, 1, d, qt, ldq, st,
                                 ldq);
    ScoreVariants(p, h, q0, j0, cut, st, ldq, nullptr);  // softcap, ALiBi (score_variants-inl.h)
    MaskBlock(p, b, h, q0, rows, j0, cols, kLog2e, st, ldq);
    SoftmaxUpdate(cut, p.bf16_products, st, ldq, m, l, alpha);
    if (j0 != keys_seen.begin) RescaleOutput(alpha, rows, o, ldo);  // o is 0 before
    const float* vrows = v + j0 * p.v_stride[2];
    size_t ldv = static_cast<size_t>(p.v_stride[2]);
    if (pack_v) {
      PackRows(v + j0 * p.v_stride[2], p.v_stride[2], cols, dv, vp, ldo);
      vrows = vp;
      ldv = ldo;
    }
    // o += P·V_j, P read from Pᵀ across its rows; a tile of query rows runs over the keys its
    // last row sees.
    TileProductToTerm<true>(cut, rows, ldo / N, st, 1, ldq, vrows, ldv, o, ldo);
  }

  if (p.sinks != nullptr) {  // the sink's term joins every row's sum
    FoldSink(p.sinks[h] * kLog2e, ldq, m, l, alpha);
    RescaleOutput(alpha, rows, o, ldo);
  }
  FinishRows(p, b, h, q0, rows, o, ldo, m, l, alpha);
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(FlashForwardBlock);

size_t flash_forward_scratch_floats(const FlashProblem& p) {
  // Sized for the widest vectors any target may use (64 lanes), so every target fits.
  auto up = [](int64_t x, int64_t m) { return static_cast<size_t>((x + m - 1) / m * m); };
  const auto ldo = static_cast<int64_t>(up(p.dv, 64));
  const size_t vector_kernel = up(p.d * kQueryBlockPadded, 16) +
                               up(kKeyBlock * kQueryBlockPadded, 16) + up(kKeyBlock * ldo, 16) +
                               up(kQueryBlock * ldo, 16) + 3 * kQueryBlockPadded;
  return p.amx_keys.data == nullptr ? vector_kernel
                                    : std::max(vector_kernel, flash_forward_amx_scratch_floats(p));
}

void flash_forward_block(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                         float* scratch) {
  if (p.amx_keys.data != nullptr) {
    flash_forward_block_amx(p, b, h, q0, rows, scratch);
  } else {
    HWY_DYNAMIC_DISPATCH(FlashForwardBlock)(p, b, h, q0, rows, scratch);
  }
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
