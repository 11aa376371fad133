// See adamw.hpp. The last partial vector takes the scalar loop, which does the same
// operations in the same order, so every element gets the same bits.
#include "src/kernels/adamw.hpp"

#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/adamw.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AdamWUpdate(float* HWY_RESTRICT p, float* HWY_RESTRICT m, float* HWY_RESTRICT v,
                 const float* HWY_RESTRICT g, int64_t n, float keep, const AdamWStep& s) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto keep_v = hn::Set(d, keep), grad_scale = hn::Set(d, s.grad_scale);
  const auto beta1 = hn::Set(d, s.beta1), beta2 = hn::Set(d, s.beta2);
  const auto rest1 = hn::Set(d, 1.0f - s.beta1), rest2 = hn::Set(d, 1.0f - s.beta2);
  const auto step_size = hn::Set(d, s.step_size), sqrt_bias2 = hn::Set(d, s.sqrt_bias2);
  const auto eps = hn::Set(d, s.eps);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto gi = hn::Mul(grad_scale, hn::LoadU(d, g + i));
    const auto pi = hn::Mul(hn::LoadU(d, p + i), keep_v);
    const auto mi = hn::Add(hn::Mul(beta1, hn::LoadU(d, m + i)), hn::Mul(rest1, gi));
    const auto vi = hn::Add(hn::Mul(beta2, hn::LoadU(d, v + i)), hn::Mul(hn::Mul(rest2, gi), gi));
    const auto denominator = hn::Add(hn::Div(hn::Sqrt(vi), sqrt_bias2), eps);
    hn::StoreU(hn::Sub(pi, hn::Div(hn::Mul(step_size, mi), denominator)), d, p + i);
    hn::StoreU(mi, d, m + i);
    hn::StoreU(vi, d, v + i);
  }
  for (; i < n; ++i) {
    const float gi = s.grad_scale * g[i];
    const float pi = p[i] * keep;
    m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
    v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
    p[i] = pi - s.step_size * m[i] / (std::sqrt(v[i]) / s.sqrt_bias2 + s.eps);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(AdamWUpdate);

void adamw_update_span(float* p, float* m, float* v, const float* g, int64_t n, float keep,
                       const AdamWStep& s) {
  HWY_DYNAMIC_DISPATCH(AdamWUpdate)(p, m, v, g, n, keep, s);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
