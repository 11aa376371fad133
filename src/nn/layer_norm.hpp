// Layer normalisation over the last dim (Ba, Kiros & Hinton 2016), as torch.nn.LayerNorm:
//   y = (x − mean) · rstd · weight + bias,   rstd = 1/√(var + eps), var the biased variance.
// Matrices are (rows, c) and contiguous.
#pragma once

#include <cstdint>

namespace attn::nn {

constexpr float kLayerNormEps = 1e-5f;

// Writes y and the per-row mean and rstd that the backward needs. bias may be null.
void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t c, float* y, float* mean, float* rstd);

// With x̂ = (x − mean)·rstd and g = dy·weight:
//   dx += rstd · (g − mean(g) − x̂ · mean(g·x̂))        (accumulates: the residual stream)
//   d_weight += Σ_rows dy·x̂,  d_bias += Σ_rows dy      (d_bias may be null)
void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t c, float* dx, float* d_weight,
                         float* d_bias);

}  // namespace attn::nn
