// LayerNorm's row loops, vectorised with Highway: the scalar sums were serial float chains
// (no reassociation without -ffast-math) and LayerNorm took ~6 % of a GPT training step.
// Formulas in src/nn/layer_norm.hpp; the callers split rows and columns over threads.
#pragma once

#include <cstdint>

namespace attn::kernels {

// Rows [0, rows) of (rows, c): y, and each row's mean and rstd. bias may be null.
void layer_norm_forward_rows(const float* x, const float* weight, const float* bias, int64_t rows,
                             int64_t c, float eps, float* y, float* mean, float* rstd);

// dx += rstd · (g − mean(g) − x̂ · mean(g·x̂)) for rows [0, rows), g = dy·weight.
void layer_norm_backward_rows(const float* dy, const float* x, const float* weight,
                              const float* mean, const float* rstd, int64_t rows, int64_t c,
                              float* dx);

// Columns [first, last): d_weight += Σ_r dy·x̂ and d_bias += Σ_r dy (null: skipped), the rows
// in order.
void layer_norm_parameter_gradients(const float* dy, const float* x, const float* mean,
                                    const float* rstd, int64_t rows, int64_t c, int64_t first,
                                    int64_t last, float* d_weight, float* d_bias);

}  // namespace attn::kernels
