// See layer_norm.hpp. Each row is walked in whole vectors, then a scalar tail: the sums are
// a vector of partial sums reduced at the end plus the tail, in a fixed order for a given CPU.
#include "src/kernels/layer_norm.hpp"

#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/layer_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

int64_t VectorPart(int64_t c) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(DF()));
  return c / lanes * lanes;
}

void LayerNormForwardRows(const float* HWY_RESTRICT x, const float* HWY_RESTRICT weight,
                          const float* HWY_RESTRICT bias, int64_t rows, int64_t c, float eps,
                          float* HWY_RESTRICT y, float* HWY_RESTRICT mean,
                          float* HWY_RESTRICT rstd) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d)), whole = VectorPart(c);
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    auto sum = hn::Zero(d);
    for (int64_t i = 0; i < whole; i += lanes) sum = hn::Add(sum, hn::LoadU(d, xr + i));
    float s = hn::GetLane(hn::SumOfLanes(d, sum));
    for (int64_t i = whole; i < c; ++i) s += xr[i];
    const float m = s * inv_c;
    const auto vm = hn::Set(d, m);
    auto squares = hn::Zero(d);
    for (int64_t i = 0; i < whole; i += lanes) {
      const auto centred = hn::Sub(hn::LoadU(d, xr + i), vm);
      squares = hn::MulAdd(centred, centred, squares);
    }
    float sq = hn::GetLane(hn::SumOfLanes(d, squares));
    for (int64_t i = whole; i < c; ++i) sq += (xr[i] - m) * (xr[i] - m);
    const float inv_std = 1.0f / std::sqrt(sq * inv_c + eps);
    const auto vs = hn::Set(d, inv_std);
    float* yr = y + r * c;
    for (int64_t i = 0; i < whole; i += lanes) {
      const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vs);
      const auto b = bias ? hn::LoadU(d, bias + i) : hn::Zero(d);
      hn::StoreU(hn::MulAdd(xhat, hn::LoadU(d, weight + i), b), d, yr + i);
    }
    for (int64_t i = whole; i < c; ++i) {
      yr[i] = (xr[i] - m) * inv_std * weight[i] + (bias ? bias[i] : 0.0f);
    }
    mean[r] = m;
    rstd[r] = inv_std;
  }
}

void LayerNormBackwardRows(const float* HWY_RESTRICT dy, const float* HWY_RESTRICT x,
                           const float* HWY_RESTRICT weight, const float* HWY_RESTRICT mean,
                           const float* HWY_RESTRICT rstd, int64_t rows, int64_t c,
                           float* HWY_RESTRICT dx) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d)), whole = VectorPart(c);
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = 0; r < rows; ++r) {
    const float *dyr = dy + r * c, *xr = x + r * c;
    const auto vm = hn::Set(d, mean[r]), vs = hn::Set(d, rstd[r]);
    auto g_sum = hn::Zero(d), gx_sum = hn::Zero(d);
    for (int64_t i = 0; i < whole; i += lanes) {
      const auto g = hn::Mul(hn::LoadU(d, dyr + i), hn::LoadU(d, weight + i));
      const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vs);
      g_sum = hn::Add(g_sum, g);
      gx_sum = hn::MulAdd(g, xhat, gx_sum);
    }
    float g_mean = hn::GetLane(hn::SumOfLanes(d, g_sum)),
          gx_mean = hn::GetLane(hn::SumOfLanes(d, gx_sum));
    for (int64_t i = whole; i < c; ++i) {
      const float g = dyr[i] * weight[i], xhat = (xr[i] - mean[r]) * rstd[r];
      g_mean += g;
      gx_mean += g * xhat;
    }
    g_mean *= inv_c;
    gx_mean *= inv_c;
    const auto vg_mean = hn::Set(d, g_mean), vgx_mean = hn::Set(d, gx_mean);
    float* dxr = dx + r * c;
    for (int64_t i = 0; i < whole; i += lanes) {
      const auto g = hn::Mul(hn::LoadU(d, dyr + i), hn::LoadU(d, weight + i));
      const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vs);
      const auto inner = hn::NegMulAdd(xhat, vgx_mean, hn::Sub(g, vg_mean));
      hn::StoreU(hn::MulAdd(vs, inner, hn::LoadU(d, dxr + i)), d, dxr + i);
    }
    for (int64_t i = whole; i < c; ++i) {
      const float g = dyr[i] * weight[i], xhat = (xr[i] - mean[r]) * rstd[r];
      dxr[i] += rstd[r] * (g - g_mean - xhat * gx_mean);
    }
  }
}

void LayerNormParameterGradients(const float* HWY_RESTRICT dy, const float* HWY_RESTRICT x,
                                 const float* HWY_RESTRICT mean, const float* HWY_RESTRICT rstd,
                                 int64_t rows, int64_t c, int64_t first, int64_t last,
                                 float* HWY_RESTRICT d_weight, float* HWY_RESTRICT d_bias) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t whole_end = first + (last - first) / lanes * lanes;
  for (int64_t r = 0; r < rows; ++r) {
    const float *dyr = dy + r * c, *xr = x + r * c;
    const auto vm = hn::Set(d, mean[r]), vs = hn::Set(d, rstd[r]);
    for (int64_t i = first; i < whole_end; i += lanes) {
      const auto g = hn::LoadU(d, dyr + i);
      const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vs);
      hn::StoreU(hn::MulAdd(g, xhat, hn::LoadU(d, d_weight + i)), d, d_weight + i);
      if (d_bias) hn::StoreU(hn::Add(hn::LoadU(d, d_bias + i), g), d, d_bias + i);
    }
    for (int64_t i = whole_end; i < last; ++i) {
      d_weight[i] += dyr[i] * ((xr[i] - mean[r]) * rstd[r]);
      if (d_bias) d_bias[i] += dyr[i];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(LayerNormForwardRows);
HWY_EXPORT(LayerNormBackwardRows);
HWY_EXPORT(LayerNormParameterGradients);

void layer_norm_forward_rows(const float* x, const float* weight, const float* bias, int64_t rows,
                             int64_t c, float eps, float* y, float* mean, float* rstd) {
  HWY_DYNAMIC_DISPATCH(LayerNormForwardRows)(x, weight, bias, rows, c, eps, y, mean, rstd);
}

void layer_norm_backward_rows(const float* dy, const float* x, const float* weight,
                              const float* mean, const float* rstd, int64_t rows, int64_t c,
                              float* dx) {
  HWY_DYNAMIC_DISPATCH(LayerNormBackwardRows)(dy, x, weight, mean, rstd, rows, c, dx);
}

void layer_norm_parameter_gradients(const float* dy, const float* x, const float* mean,
                                    const float* rstd, int64_t rows, int64_t c, int64_t first,
                                    int64_t last, float* d_weight, float* d_bias) {
  HWY_DYNAMIC_DISPATCH(LayerNormParameterGradients)
  (dy, x, mean, rstd, rows, c, first, last, d_weight, d_bias);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
