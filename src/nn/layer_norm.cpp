// See layer_norm.hpp. Rows are independent, so they are split over threads; the parameter
// gradients are sums over rows, computed per column block in row order (deterministic). The
// loops themselves are Highway kernels (src/kernels/layer_norm.cpp).
#include "src/nn/layer_norm.hpp"

#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/layer_norm.hpp"

namespace attn::nn {

void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t c, float* y, float* mean, float* rstd) {
  const detail::PhaseScope clock(Phase::kLayerNorm);
  detail::parallel_ranges(rows, 64, [&](int64_t first, int64_t last) {
    kernels::layer_norm_forward_rows(x + first * c, weight, bias, last - first, c, kLayerNormEps,
                                     y + first * c, mean + first, rstd + first);
  });
}

void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t c, float* dx, float* d_weight,
                         float* d_bias) {
  const detail::PhaseScope clock(Phase::kLayerNorm);
  detail::parallel_ranges(rows, 64, [&](int64_t first, int64_t last) {
    kernels::layer_norm_backward_rows(dy + first * c, x + first * c, weight, mean + first,
                                      rstd + first, last - first, c, dx + first * c);
  });
  detail::parallel_ranges(c, 32, [&](int64_t first, int64_t last) {
    kernels::layer_norm_parameter_gradients(dy, x, mean, rstd, rows, c, first, last, d_weight,
                                            d_bias);
  });
}

}  // namespace attn::nn
