// The online softmax of the fused forward (flash_forward.cpp, flash_forward_amx.cpp), compiled
// once per Highway target (include it after tile_product-inl.h): each key block's update of the
// running max m, sum l and rescaling factor per query, and the rows' ends.
#if defined(ATTN_KERNELS_ONLINE_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_ONLINE_SOFTMAX_INL_H_
#undef ATTN_KERNELS_ONLINE_SOFTMAX_INL_H_
#else
#define ATTN_KERNELS_ONLINE_SOFTMAX_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "src/kernels/block_visibility.hpp"
#include "src/kernels/flash_problem.hpp"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// One query vector's part of a key block's online-softmax step: the new running max over the
// block's first `cols` keys (Sᵀ rows, each times score_scale > 0: 1 for scores scaled already),
// and the shift its exponentials take.
struct SoftmaxShift {
  VF m_old, m_new, shift;
  hn::Mask<DF> empty;  // rows that have seen no key yet
};

inline SoftmaxShift ShiftForBlock(const float* st, size_t ldq, size_t r, size_t cols,
                                  const float* m, float score_scale) {
  const DF df;
  const VF minus_inf = hn::Set(df, kMinusInf);
  // Four running maxima: one would wait out vmaxps' latency on every key.
  VF max0 = minus_inf, max1 = minus_inf, max2 = minus_inf, max3 = minus_inf;
  size_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    max0 = hn::Max(max0, hn::LoadU(df, st + c * ldq + r));
    max1 = hn::Max(max1, hn::LoadU(df, st + (c + 1) * ldq + r));
    max2 = hn::Max(max2, hn::LoadU(df, st + (c + 2) * ldq + r));
    max3 = hn::Max(max3, hn::LoadU(df, st + (c + 3) * ldq + r));
  }
  for (; c < cols; ++c) max0 = hn::Max(max0, hn::LoadU(df, st + c * ldq + r));
  const VF block_max = hn::Max(hn::Max(max0, max1), hn::Max(max2, max3));
  SoftmaxShift s;
  s.m_old = hn::LoadU(df, m + r);
  s.m_new = hn::Max(s.m_old, hn::Mul(block_max, hn::Set(df, score_scale)));
  // A row that has seen no key yet keeps m = -inf: shift by 0 so exp(-inf − 0) = 0, not NaN.
  s.empty = hn::Eq(s.m_new, minus_inf);
  s.shift = hn::IfThenZeroElse(s.empty, s.m_new);
  return s;
}

// The rest of the step, once the block's probabilities of vector r sum to `sum`: l, m and the
// factor alpha that rescales o.
inline void FinishBlockStep(const SoftmaxShift& s, VF sum, size_t r, float* m, float* l,
                            float* alpha) {
  const DF df;
  const VF a =
      hn::IfThenElse(s.empty, hn::Set(df, 1.0f), Exp2Flushed(df, hn::Sub(s.m_old, s.shift)));
  hn::StoreU(hn::MulAdd(a, hn::LoadU(df, l + r), sum), df, l + r);
  hn::StoreU(s.m_new, df, m + r);
  hn::StoreU(a, df, alpha + r);
}

// The online-softmax step, vectorised across query rows (one vector = N queries): scores ->
// probabilities in place, m and l updated, alpha = 2^(m_old − m_new) for rescaling o. The
// scores and m are in base 2 (multiplied by log2 e: see FlashForwardBlock), so e^(s − m) is
// 2^(s − m) here. Each vector of queries runs over the keys o += P·V will read for it
// (KeysForQueryVector).
inline void SoftmaxUpdate(const DiagonalCut& cut, bool bf16_products, float* st, size_t ldq,
                          float* m, float* l, float* alpha) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < ldq; r += N) {
    const size_t cols = KeysForQueryVector(cut, r);
    const SoftmaxShift s = ShiftForBlock(st, ldq, r, cols, m, 1.0f);
    VF sum = hn::Zero(df);
    for (size_t c = 0; c < cols; ++c) {
      const VF e = Exp2Flushed(df, hn::Sub(hn::LoadU(df, st + c * ldq + r), s.shift));
      // bf16 products: P·V takes P rounded; l sums it unrounded, as a bf16 matmul kernel
      // would (the rounding errors of the terms then average out in O, not in l).
      hn::StoreU(bf16_products ? RoundedToBfloat16(df, e) : e, df, st + c * ldq + r);
      sum = hn::Add(sum, e);
    }
    FinishBlockStep(s, sum, r, m, l, alpha);
  }
}

// The ends of the rows, once after the last key block: 1 / l into `inverse` (ldq floats; 0 for a
// query that saw no key, whose O is then 0) and logsumexp = m·ln 2 + log l (m in base 2; +inf
// for l = 0), a vector of queries at a time. A division per element of O cost as much as a
// whole key block's softmax for short sequences, and one std::log per query was a sixth of a
// task at T = 64, d = 32.
inline void FinishSums(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, size_t rows,
                       const float* m, const float* l, float* inverse) {
  const DF df;
  const size_t N = hn::Lanes(df);
  float* lse = p.logsumexp == nullptr ? nullptr : p.logsumexp + (b * p.heads + h) * p.tq + q0;
  for (size_t r = 0; r < rows; r += N) {
    const VF lv = hn::LoadU(df, l + r);
    const auto empty = hn::Eq(lv, hn::Zero(df));
    hn::StoreU(hn::IfThenZeroElse(empty, hn::Div(hn::Set(df, 1.0f), lv)), df, inverse + r);
    if (lse == nullptr) continue;
    const VF log_sum = hn::MulAdd(hn::LoadU(df, m + r), hn::Set(df, kLn2), hn::Log(df, lv));
    const VF value =
        hn::IfThenElse(empty, hn::Set(df, std::numeric_limits<float>::infinity()), log_sum);
    if (rows - r >= N) {
      hn::StoreU(value, df, lse + r);
    } else {  // the block's last queries: the lanes past them are another block's
      hn::BlendedStore(value, hn::FirstN(df, rows - r), df, lse + r);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
