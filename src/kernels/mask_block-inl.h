// The element-wise mask of one (keys × queries) block of transposed scores, compiled once per
// Highway target (include it after simd_common-inl.h): the fused forward's and backward's
// kernels call it on every block that straddles the causal diagonal, a window's edge or left
// padding, or has an explicit mask. Its -inf runs are vector stores: compiled for the baseline
// (16-byte stores), as it was in block_visibility.cpp, it took 5 % of the samples of the small
// GPT's attention backward (T = 64, where every block is on the diagonal) on an AVX-512 Xeon.
#if defined(ATTN_KERNELS_MASK_BLOCK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_MASK_BLOCK_INL_H_
#undef ATTN_KERNELS_MASK_BLOCK_INL_H_
#else
#define ATTN_KERNELS_MASK_BLOCK_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "src/kernels/explicit_mask.hpp"
#include "src/kernels/flash_problem.hpp"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// x[i] = -inf for i in [begin, end).
inline void FillMinusInf(float* x, int64_t begin, int64_t end) {
  const DF df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  const auto minus_inf = hn::Set(df, kMinusInf);
  int64_t i = begin;
  for (; i + n <= end; i += n) hn::StoreU(minus_inf, df, x + i);
  for (; i < end; ++i) x[i] = kMinusInf;
}

// Sets to -inf (or adds additive_scale × the additive mask to) the transposed scores
// st[c·ldq + r] of key j0 + c and query q0 + r, for the keys that query may not see: the
// causal / sliding-window rule, left padding (key_starts) and the explicit mask.
// additive_scale is the factor the scores carry (log2 e: the kernels' softmax runs in base 2).
// Query lanes past `rows` (padding) are left alone.
inline void MaskBlock(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, size_t rows,
                      int64_t j0, size_t cols, float additive_scale, float* st, size_t ldq) {
  const int64_t first_position = p.query_position0 + q0;
  const auto n = static_cast<int64_t>(rows);
  // Most blocks lie wholly below the diagonal (and inside the window): without an explicit
  // mask there is nothing to do, and walking their keys cost 1 % of the causal forward.
  const int64_t last_key = j0 + static_cast<int64_t>(cols) - 1;
  const bool every_query_sees_every_key =
      (!p.causal && p.window == 0) ||
      (last_key <= first_position && (p.window == 0 || j0 > first_position + n - 1 - p.window));
  const int64_t key_start = p.key_starts != nullptr ? p.key_starts[b] : 0;
  if (every_query_sees_every_key && p.mask == nullptr && j0 >= key_start) return;
  for (size_t c = 0; c < cols; ++c) {
    float* key_row = st + c * ldq;
    const int64_t j = j0 + static_cast<int64_t>(c);
    if (j < key_start) {  // left padding: no query sees it
      FillMinusInf(key_row, 0, n);
      continue;
    }
    if (p.causal || p.window > 0) {
      // Query r (position first_position + r) sees key j when j <= position, i.e. r >= j − first.
      FillMinusInf(key_row, 0, std::clamp<int64_t>(j - first_position, 0, n));
      if (p.window > 0) {  // and when position < j + window
        FillMinusInf(key_row, std::clamp<int64_t>(j + p.window - first_position, 0, n), n);
      }
    }
  }
  if (p.mask != nullptr) {  // keys of left padding are -inf already and stay so
    const auto first =
        static_cast<size_t>(std::clamp<int64_t>(key_start - j0, 0, static_cast<int64_t>(cols)));
    apply_explicit_mask(p, b, h, q0, n, j0, first, cols, additive_scale, st, ldq);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // ATTN_KERNELS_MASK_BLOCK_INL_H_
