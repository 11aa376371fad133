// See linear.hpp.
#include "src/linalg/linear.hpp"

#include <algorithm>

#include "attn/gemm.hpp"
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

void linear_forward(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y, Dtype precision) {
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
                     Dtype precision) {
  const PhaseScope clock(Phase::kMatmul);  // the bias's column sums too
  if (dx) {
    gemm(false, true, rows, in, out, 1.0f, dy, out, w, out, accumulate_dx ? 1.0f : 0.0f, dx, in,
         precision);
  }
  gemm(true, false, in, out, rows, 1.0f, x, in, dy, out, 1.0f, dw, out, precision);
  if (d_bias) add_column_sums(dy, rows, out, d_bias);
}

}  // namespace attn::detail
