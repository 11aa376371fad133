// One block of a matrix product with bfloat16 operands, on the calling thread: the
// Dtype::kBFloat16 path of attn::gemm (gemm.cpp splits the product into
// blocks over the threads and calls this for each). Internal to the library.
#pragma once

#include <cstdint>

namespace attn::detail {

// A matrix operand of a product, as stored with row stride ld: floats, or — for bf16 products
// only — the bfloat16 bits of floats rounded once already (round_rows_to_bfloat16), so that a
// tensor that feeds several products of a training step is rounded once, not per product and
// per block. The same values either way, so the same results.
struct MatrixOperand {
  const float* floats = nullptr;
  const uint16_t* bits = nullptr;
  int64_t ld = 0;

  static MatrixOperand of(const float* floats, int64_t ld) { return {floats, nullptr, ld}; }
  static MatrixOperand of(const uint16_t* bits, int64_t ld) { return {nullptr, bits, ld}; }
  // The operand `elements` elements on (a block's first row or column).
  MatrixOperand moved(int64_t elements) const {
    return {floats ? floats + elements : nullptr, bits ? bits + elements : nullptr, ld};
  }
};

// C = alpha·op(A)·op(B) + beta·C with A and B rounded to bfloat16 (to nearest, ties to even)
// and the products summed in float, as in gemm. Through oneDNN's bf16 matmul kernel where the
// CPU has one (AVX-512: twice the multiply rate of float); otherwise the same rounded operands
// go through the float product, so the numbers agree to the order of the additions. An operand
// given as bits is read as stored (its block copied to adjacent rows first when they lie apart,
// so that every block runs the kernel a float operand of its shape would).
void gemm_bf16_one_thread(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha,
                          MatrixOperand a, MatrixOperand b, float beta, float* c, int64_t ldc);

// attn::gemm's Dtype::kBFloat16 products on operands that may be rounded already, split over
// the threads as gemm splits them (so the bits of gemm on the same values), and, when bias is
// set (beta then 0), C = op(A)·op(B) + bias as gemm_bias. Defined in gemm.cpp.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               MatrixOperand a, MatrixOperand b, float beta, float* c, int64_t ldc,
               const float* bias = nullptr);

// dst (rows, cols, contiguous) = src's rows (stride ld) rounded to bfloat16, over the threads:
// a tensor rounded once for the products that read it.
void round_rows_to_bfloat16(const float* src, int64_t rows, int64_t cols, int64_t ld,
                            uint16_t* dst);

// Products whose B is a weight matrix kept in bfloat16 (Gpt's --weights bf16), over the
// threads as attn::gemm splits them, giving the bits attn::gemm (float) gives on B's values as
// floats: one row (a generated token) runs the gemv kernels on B as stored — half the bytes of
// a float product to read; more rows (a prompt) widen B's block to floats a piece at a time
// for oneDNN's sgemm. (oneDNN's bf16 product, with A rounded too, ran a GPT-2 small prompt
// at 298 tokens/s against 520 in float on an AVX-512 BF16 CPU: there widening is both faster
// and exact. With AMX, more rows take that product: gemm_bf16_weights_one_thread; on AMD's
// AVX-512 BF16, attn's vdpbf16ps kernel, A rounded as well: gemm_dpbf16.hpp.)
// C = alpha·A·op(B) + beta·C, A (m, k) row-major.
void gemm_bf16_weights(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                       int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                       int64_t ldc);
// C = A·op(B) + bias, the bias (n) in every row.
void gemm_bias_bf16_weights(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                            int64_t lda, const uint16_t* b, int64_t ldb, const float* bias,
                            float* c, int64_t ldc);

// One block of gemm_bf16_weights on oneDNN's bf16 kernel, A rounded to bfloat16 (B is already):
// C = alpha·A·op(B) + beta·C, A (m, k) row-major. False, with nothing done, where the CPU has
// no such kernel. Used where the CPU has AMX (design.md: the prompt with bf16 weights).
bool gemm_bf16_weights_one_thread(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float* a, int64_t lda, const uint16_t* b, int64_t ldb,
                                  float beta, float* c, int64_t ldc);

// For tests: true makes every bf16 product take the float fallback, false (the default) uses
// oneDNN's kernel where the CPU has it. Returns whether this CPU has it.
bool use_bf16_fallback_for_test(bool fallback);

}  // namespace attn::detail
