// See gelu.hpp: the work is split in fixed chunks over the threads, each chunk run by the
// vectorised kernel in src/kernels/gelu.cpp.
#include "src/nn/gelu.hpp"

#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/gelu.hpp"

namespace attn::nn {

void gelu_forward(const float* x, int64_t n, float* y) {
  const detail::PhaseScope clock(Phase::kGelu);
  detail::parallel_ranges(n, 32768, [&](int64_t first, int64_t last) {
    kernels::gelu_forward_span(x + first, last - first, y + first);
  });
}

void gelu_backward(const float* dy, const float* x, int64_t n, float* dx) {
  const detail::PhaseScope clock(Phase::kGelu);
  detail::parallel_ranges(n, 32768, [&](int64_t first, int64_t last) {
    kernels::gelu_backward_span(dy + first, x + first, last - first, dx + first);
  });
}

}  // namespace attn::nn
