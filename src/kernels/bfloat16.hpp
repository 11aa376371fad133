// Rounding float matrices to bfloat16 (the top 16 bits of a float, 8 bits of mantissa), to
// nearest with ties to even, vectorised with Highway: the operands of the bf16 matrix
// products (attn/gemm.hpp); and bfloat16 rows widened back to floats. Highway's own DemoteTo
// truncates; this rounds as attn::to_bfloat16 (attn/bfloat16.hpp) does, element for element, NaN
// staying a quiet NaN.
#pragma once

#include <bit>
#include <cstdint>

namespace attn::kernels {

// The bits of a float that holds a bfloat16 value exactly (an operand rounded already): its top
// half, no rounding to do.
inline uint16_t exact_bfloat16_bits(float x) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
}

// dst[r·cols + c] = bf16(src[r·ld + c]) for r < rows, c < cols: a (rows, cols) block of a
// row-major matrix with row stride ld, written contiguously.
// With AVX-512 BF16 one instruction per 16 floats, where subnormal inputs round to 0;
// elsewhere the Highway kernel.
void round_to_bfloat16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst);
// dst[i] = src[i] rounded to the nearest bfloat16, kept as a float (n values; in place is
// fine): the operands of attention's bf16 products, the same on every CPU.
void round_floats_to_bfloat16(const float* src, int64_t n, float* dst);
// The same for rows: dst[r·width + c] = src[r·stride + c] rounded, for r < rows, c < width.
void round_float_rows_to_bfloat16(const float* src, int64_t stride, int64_t rows, int64_t width,
                                  float* dst);
// dst[r·width + c] = the float that src[r·stride + c] holds (exactly: a bfloat16 is a float's
// top half), for r < rows, c < width: rows of bfloat16 words widened into contiguous floats.
void widen_bfloat16(const uint16_t* src, int64_t stride, int64_t rows, int64_t width, float* dst);
// The Highway kernel on any CPU, subnormals rounded as attn::to_bfloat16 rounds them (the tests
// compare the two; sdpa_bfloat16's output takes it, for the same bits on every CPU).
void round_to_bfloat16_portable(const float* src, int64_t rows, int64_t cols, int64_t ld,
                                uint16_t* dst);

}  // namespace attn::kernels
