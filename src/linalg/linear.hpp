// A fully connected layer on contiguous row-major matrices, y = x·W + b with W (in, out), and
// its backward. Every product goes through attn::gemm (oneDNN), in the precision given.
#pragma once

#include <cstdint>

#include "attn/gemm.hpp"

namespace attn::detail {

// sums[c] += Σ_r m[r·cols + c] over the rows in order: a bias gradient (the same bits for
// every thread count: each column is summed by one thread).
void add_column_sums(const float* m, int64_t rows, int64_t cols, float* sums);

// What a training step in bf16 rounds once for its products, where each product would round
// it again (Dtype::kBFloat16 only; a null member is rounded by the products that read it):
// w, the weight's bits (the step's rounded copy of its matrices); x, rows × in of space that
// linear_forward fills with x's bits and linear_backward then reads for dW = xᵀ·dy.
struct RoundedOperands {
  const uint16_t* w = nullptr;
  uint16_t* x = nullptr;
};

// y (rows, out) = x (rows, in) · w (in, out) + bias (out; may be null).
void linear_forward(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y, Dtype precision = Dtype::kFloat32,
                    RoundedOperands rounded = {});

// The same with W kept in bfloat16 (gemm_bf16_weights: one row reads W as stored, more rows
// widen it a piece at a time for the float product; the bits of float weights either way).
void linear_forward(const float* x, const uint16_t* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y);

// W in float, or in bfloat16 when w_bf16 is set (w then only names the layout).
inline void linear_forward(const float* x, const float* w, const uint16_t* w_bf16,
                           const float* bias, int64_t rows, int64_t in, int64_t out, float* y,
                           Dtype precision, RoundedOperands rounded = {}) {
  if (w_bf16) return linear_forward(x, w_bf16, bias, rows, in, out, y);
  linear_forward(x, w, bias, rows, in, out, y, precision, rounded);
}

// dx = dy·Wᵀ (overwritten, or added to when accumulate_dx; dx may be null to skip it),
// dw += xᵀ·dy, d_bias += Σ_rows dy (d_bias may be null; always summed in float). In bf16, dy
// is rounded once for both products; rounded.x, when set, holds what linear_forward left.
void linear_backward(const float* dy, const float* x, const float* w, int64_t rows, int64_t in,
                     int64_t out, float* dx, bool accumulate_dx, float* dw, float* d_bias,
                     Dtype precision = Dtype::kFloat32, RoundedOperands rounded = {});

}  // namespace attn::detail
