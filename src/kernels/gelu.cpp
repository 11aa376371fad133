// See gelu.hpp. With u = √(2/π)·(x + 0.044715·x³) and t = tanh(u):
//   gelu(x)  = ½·x·(1 + t)
//   gelu'(x) = ½·(1 + t) + ½·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)
// computed through the logistic function σ, since ½·(1 + tanh(u)) = σ(2u) = 1/(1 + e^(−2u)):
//   s = σ(2u),   gelu(x) = x·s,   gelu'(x) = s + 2·x·s·(1 − s)·√(2/π)·(1 + 3·0.044715·x²)
// (½·(1 − t²) = 2·s·(1 − s)). One exponential (simd_common's Exp2Flushed) and one reciprocal
// (an estimate and Newton steps, not a division) per element. On a 768 × 512 array (a GPT
// block's MLP), one core: Highway's tanh took 690–770 µs forward on AVX2, e^x and a division
// 450–530; on an AVX-512 Xeon (Emerald Rapids) e^x and a division took 169 µs forward and 217
// backward, this 134 and 177 (least of 200; the division was most of the difference). It is
// also the more accurate form: 1 + tanh(u) cancels for u ≪ 0 (x < −5), σ(2u) does not.
// The last partial vector goes through a padded copy, so every element takes the same path.
#include "src/kernels/gelu.hpp"

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/gelu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// e^(−2u) = 2^(−2u·log₂e), by simd_common's Exp2Flushed, with σ(2u) = 1/(1 + e^(−2u)) =
// ½·(1 + tanh(u)). The exponent is clamped to 125 (2^125 ≈ 4e37), so 1 + e^(−2u) and its
// Reciprocal stay normal floats: far-negative x give σ ≈ 2.4e-38, not inf/inf. Below −92
// Exp2Flushed gives 0, and σ = 1, as it is to float's precision.
template <class D, class V>
HWY_INLINE V ExpOfMinus2U(D d, V x) {
  const V x3 = hn::Mul(hn::Mul(x, x), x);
  const V exponent =
      hn::Mul(hn::Set(d, -2.0f * kSqrt2OverPi * kLog2e), hn::MulAdd(hn::Set(d, kCubic), x3, x));
  return Exp2Flushed(d, hn::Min(exponent, hn::Set(d, 125.0f)));
}

template <class D, class V>
HWY_INLINE V SigmoidOf(D d, V exp_minus_2u) {
  return Reciprocal(d, hn::Add(hn::Set(d, 1.0f), exp_minus_2u));
}

// Below x = −20, gelu(x) is below 1e−200 in size: 0 in float. (The clamped exponent alone
// would leave x·1e−38, which is not small for x near −FLT_MAX.)
template <class D, class V>
HWY_INLINE V GeluVector(D d, V x) {
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -20.0f)),
                            hn::Mul(x, SigmoidOf(d, ExpOfMinus2U(d, x))));
}

template <class D, class V>
HWY_INLINE V GeluGradVector(D d, V dy, V x) {
  const V one = hn::Set(d, 1.0f);
  const V e = ExpOfMinus2U(d, x);
  const V s = SigmoidOf(d, e);
  // Past |x| = 20, s·(1 − s) < 1e-30 and the slope term is nothing; clamping x there keeps
  // x·u'(x) finite (x³ overflows near 1e13), so gelu'(±huge) is 1 or 0, not inf·0 = NaN.
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -20.0f)), hn::Set(d, 20.0f));
  const V du = hn::Mul(hn::Set(d, 2.0f * kSqrt2OverPi),
                       hn::MulAdd(hn::Set(d, 3.0f * kCubic), hn::Mul(xc, xc), one));
  // 1 − s = e·s: 1 − s itself would be only as exact as s's rounding, which x·u' (20 at
  // x = 4) magnifies: 2e-6 where this is 2e-7.
  const V slope = hn::Mul(hn::Mul(xc, du), hn::Mul(s, hn::Mul(e, s)));  // 2·x·s·(1 − s)·u'
  // NaN in, NaN out: the clamp above would turn a NaN into ±20.
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Mul(dy, hn::Add(s, slope)));
}

void GeluForward(const float* x, int64_t n, float* y) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(GeluVector(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    HWY_ALIGN float in[hn::MaxLanes(d)] = {}, out[hn::MaxLanes(d)];
    std::copy(x + i, x + n, in);
    hn::Store(GeluVector(d, hn::Load(d, in)), d, out);
    std::copy(out, out + (n - i), y + i);
  }
}

void GeluBackward(const float* dy, const float* x, int64_t n, float* dx) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(GeluGradVector(d, hn::LoadU(d, dy + i), hn::LoadU(d, x + i)), d, dx + i);
  }
  if (i < n) {
    HWY_ALIGN float g[hn::MaxLanes(d)] = {}, in[hn::MaxLanes(d)] = {}, out[hn::MaxLanes(d)];
    std::copy(dy + i, dy + n, g);
    std::copy(x + i, x + n, in);
    hn::Store(GeluGradVector(d, hn::Load(d, g), hn::Load(d, in)), d, out);
    std::copy(out, out + (n - i), dx + i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(GeluForward);
HWY_EXPORT(GeluBackward);

void gelu_forward_span(const float* x, int64_t n, float* y) {
  HWY_DYNAMIC_DISPATCH(GeluForward)(x, n, y);
}

void gelu_backward_span(const float* dy, const float* x, int64_t n, float* dx) {
  HWY_DYNAMIC_DISPATCH(GeluBackward)(dy, x, n, dx);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
