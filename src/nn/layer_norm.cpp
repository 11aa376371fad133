// See layer_norm.hpp. Rows are independent, so they are split over threads; the parameter
// gradients are sums over rows, computed per column block in row order (deterministic).
#include "src/nn/layer_norm.hpp"

#include <cmath>

#include "src/nn/row_parallel.hpp"

namespace attn::nn {

void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t c, float* y, float* mean, float* rstd) {
  parallel_ranges(rows, 64, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* xr = x + r * c;
      float sum = 0.0f;
      for (int64_t i = 0; i < c; ++i) sum += xr[i];
      const float m = sum / static_cast<float>(c);
      float squares = 0.0f;
      for (int64_t i = 0; i < c; ++i) squares += (xr[i] - m) * (xr[i] - m);
      const float s = 1.0f / std::sqrt(squares / static_cast<float>(c) + kLayerNormEps);
      float* yr = y + r * c;
      for (int64_t i = 0; i < c; ++i) {
        yr[i] = (xr[i] - m) * s * weight[i] + (bias ? bias[i] : 0.0f);
      }
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t c, float* dx, float* d_weight,
                         float* d_bias) {
  parallel_ranges(rows, 64, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float *dyr = dy + r * c, *xr = x + r * c;
      float g_mean = 0.0f, gx_mean = 0.0f;
      for (int64_t i = 0; i < c; ++i) {
        const float g = dyr[i] * weight[i], xhat = (xr[i] - mean[r]) * rstd[r];
        g_mean += g;
        gx_mean += g * xhat;
      }
      g_mean /= static_cast<float>(c);
      gx_mean /= static_cast<float>(c);
      float* dxr = dx + r * c;
      for (int64_t i = 0; i < c; ++i) {
        const float g = dyr[i] * weight[i], xhat = (xr[i] - mean[r]) * rstd[r];
        dxr[i] += rstd[r] * (g - g_mean - xhat * gx_mean);
      }
    }
  });
  parallel_ranges(c, 32, [&](int64_t first, int64_t last) {
    for (int64_t r = 0; r < rows; ++r) {
      const float *dyr = dy + r * c, *xr = x + r * c;
      for (int64_t i = first; i < last; ++i) {
        d_weight[i] += dyr[i] * (xr[i] - mean[r]) * rstd[r];
        if (d_bias) d_bias[i] += dyr[i];
      }
    }
  });
}

}  // namespace attn::nn
