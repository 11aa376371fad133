// See gelu.hpp. With u = √(2/π)·(x + 0.044715·x³) and t = tanh(u):
//   gelu(x)  = ½·x·(1 + t)
//   gelu'(x) = ½·(1 + t) + ½·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)
// The last partial vector goes through a padded copy, so every element takes the same path.
#include <algorithm>

#include "src/kernels/gelu.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/gelu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

template <class D, class V>
HWY_INLINE V TanhOfU(D d, V x) {
  const V x3 = hn::Mul(hn::Mul(x, x), x);
  return hn::CallTanh(d, hn::Mul(hn::Set(d, kSqrt2OverPi), hn::MulAdd(hn::Set(d, kCubic), x3, x)));
}

template <class D, class V>
HWY_INLINE V GeluVector(D d, V x) {
  const V half = hn::Set(d, 0.5f);
  return hn::Mul(hn::Mul(half, x), hn::Add(hn::Set(d, 1.0f), TanhOfU(d, x)));
}

template <class D, class V>
HWY_INLINE V GeluGradVector(D d, V dy, V x) {
  const V one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f);
  const V t = TanhOfU(d, x);
  const V du = hn::Mul(hn::Set(d, kSqrt2OverPi),
                       hn::MulAdd(hn::Set(d, 3.0f * kCubic), hn::Mul(x, x), one));
  const V slope = hn::Mul(hn::Mul(half, x), hn::Mul(hn::NegMulAdd(t, t, one), du));
  return hn::Mul(dy, hn::MulAdd(half, hn::Add(one, t), slope));
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

void gelu_forward_span(const float* x, int64_t n, float* y) { HWY_DYNAMIC_DISPATCH(GeluForward)(x, n, y); }

void gelu_backward_span(const float* dy, const float* x, int64_t n, float* dx) {
  HWY_DYNAMIC_DISPATCH(GeluBackward)(dy, x, n, dx);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
