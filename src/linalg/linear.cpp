// See linear.hpp.
#include "src/linalg/linear.hpp"

#include <algorithm>

#include "attn/gemm.hpp"
#include "src/core/kept_buffer.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/reductions.hpp"
#include "src/linalg/gemm_bf16.hpp"

namespace attn::detail {

void add_column_sums(const float* m, int64_t rows, int64_t cols, float* sums) {
  parallel_ranges(cols, 64, [&](int64_t first, int64_t last) {
    kernels::add_column_sums(m + first, rows, last - first, cols, sums + first);
  });
}

namespace {

// An operand of a bf16 product: its bits where they were rounded already, else its floats.
MatrixOperand bf16_operand(const float* floats, const uint16_t* bits, int64_t ld) {
  return bits ? MatrixOperand::of(bits, ld) : MatrixOperand::of(floats, ld);
}

}  // namespace

void linear_forward(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y, Dtype precision, RoundedOperands rounded) {
  if (precision == Dtype::kBFloat16) {
    const PhaseScope clock(Phase::kMatmul);  // the rounding of x too
    if (rounded.x) round_rows_to_bfloat16(x, rows, in, in, rounded.x);
    gemm_bf16(false, false, rows, out, in, 1.0f, bf16_operand(x, rounded.x, in),
              bf16_operand(w, rounded.w, out), 0.0f, y, out, bias);
    return;
  }
  if (bias) {
    gemm_bias(false, false, rows, out, in, x, in, w, out, bias, y, out, precision);
  } else {
    gemm(false, false, rows, out, in, 1.0f, x, in, w, out, 0.0f, y, out, precision);
  }
}

void linear_forward(const float* x, const uint16_t* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y) {
  if (bias) {
    gemm_bias_bf16_weights(false, rows, out, in, x, in, w, out, bias, y, out);
  } else {
    gemm_bf16_weights(false, rows, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
  }
}

void linear_backward(const float* dy, const float* x, const float* w, int64_t rows, int64_t in,
                     int64_t out, float* dx, bool accumulate_dx, float* dw, float* d_bias,
                     Dtype precision, RoundedOperands rounded) {
  const PhaseScope clock(Phase::kMatmul);  // the bias's column sums too
  if (precision == Dtype::kBFloat16) {
    // dy feeds both products: rounded once here, not by each of their blocks.
    const KeptBuffer dy_bits(static_cast<size_t>(rows * out) * sizeof(uint16_t));
    round_rows_to_bfloat16(dy, rows, out, out, dy_bits.as<uint16_t>());
    const MatrixOperand rounded_dy = MatrixOperand::of(dy_bits.as<uint16_t>(), out);
    if (dx) {
      gemm_bf16(false, true, rows, in, out, 1.0f, rounded_dy, bf16_operand(w, rounded.w, out),
                accumulate_dx ? 1.0f : 0.0f, dx, in);
    }
    gemm_bf16(true, false, in, out, rows, 1.0f, bf16_operand(x, rounded.x, in), rounded_dy, 1.0f,
              dw, out);
    if (d_bias) add_column_sums(dy, rows, out, d_bias);
    return;
  }
  if (dx) {
    gemm(false, true, rows, in, out, 1.0f, dy, out, w, out, accumulate_dx ? 1.0f : 0.0f, dx, in,
         precision);
  }
  gemm(true, false, in, out, rows, 1.0f, x, in, dy, out, 1.0f, dw, out, precision);
  if (d_bias) add_column_sums(dy, rows, out, d_bias);
}

}  // namespace attn::detail
