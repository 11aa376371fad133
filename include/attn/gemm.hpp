// The one entry point for large matrix products (projections, MLPs): oneDNN's JIT sgemm,
// split across the library's threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "attn/dtype.hpp"
#include "attn/tensor.hpp"

namespace attn {

// The arithmetic of a product, an attn::Dtype (Dtype is its older name). kFloat32:
// float operands, float sums. kBFloat16: both operands rounded to bfloat16 (8 bits of
// mantissa; to nearest, ties to even), the products summed in float, C in float —
// mixed-precision training's matrix products, about twice as fast on a CPU with AVX-512 BF16
// (oneDNN's bf16 kernel); elsewhere the rounded operands go through the float product (same
// rounding, float speed).

// C = alpha · op(A) · op(B) + beta · C, row-major, op(X) = X or Xᵀ.
// op(A) is (m, k), op(B) is (k, n), C is (m, n); lda, ldb, ldc are the row strides (in
// elements) of A, B, C as stored. Throws attn::Error for negative sizes or strides too small.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          Dtype precision = Dtype::kFloat32);

// C = op(A) · op(B) + bias, the bias (n values) added to every row of C (a linear layer's
// forward); the same checks as gemm.
void gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, const float* bias, float* c, int64_t ldc,
               Dtype precision = Dtype::kFloat32);

// (M, K)·(K, N) -> (M, N) for matrix views whose last dim is contiguous or whose first dim is
// (a transpose); anything else is copied first.
Tensor matmul(const Tensor& a, const Tensor& b);

// X·W: x (…, d_in), w (d_in, d_out) -> (…, d_out).
Tensor linear(const Tensor& x, const Tensor& w);

}  // namespace attn
