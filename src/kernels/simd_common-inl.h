// What the SIMD kernels share, compiled once per Highway target: include it after
// hwy/foreach_target.h, as the kernels do. The guard below is Highway's per-target pattern:
// the header is re-read for each target that foreach_target.h compiles.
#if defined(ATTN_KERNELS_SIMD_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_SIMD_COMMON_INL_H_
#undef ATTN_KERNELS_SIMD_COMMON_INL_H_
#else
#define ATTN_KERNELS_SIMD_COMMON_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// `rows` rows of `width` floats (src, stride apart) into dst rows ld apart, zero-padded: rows
// the register tiles can read as whole vectors.
inline void PackRows(const float* src, int64_t stride, size_t rows, size_t width, float* dst,
                     size_t ld) {
  for (size_t r = 0; r < rows; ++r) {
    const float* row = src + static_cast<int64_t>(r) * stride;
    std::copy(row, row + width, dst + r * ld);
    std::fill(dst + r * ld + width, dst + (r + 1) * ld, 0.0f);
  }
}

// exp(x) for x ≤ 0, flushed to 0 below x = −64 (e^−64 ≈ 1.6e−28). A probability that small is
// worth nothing next to the row's largest, 1, but when it, or its product with a value, is
// subnormal (< 2^−126), every FMA that touches it costs a microcode assist: with
// Wq = Wk = Wv, where each query peaks sharply on its own key, they made the multi-head block
// 2.6× slower (110 ms instead of 42 at T = 1024). −64 keeps p·v normal for |v| ≥ 1e−10.
HWY_INLINE VF ExpFlushed(DF df, VF x) {
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(df, -64.0f)), hn::Exp(df, x));
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
