// GELU (tanh form) over a span, vectorised (std::tanh made GELU a third of a GPT training step
// once). Formulas in src/nn/gelu.hpp; the method in gelu.cpp.
#pragma once

#include <cstdint>

namespace attn::kernels {

void gelu_forward_span(const float* x, int64_t n, float* y);
// dx = dy · gelu'(x); dx may alias dy.
void gelu_backward_span(const float* dy, const float* x, int64_t n, float* dx);

}  // namespace attn::kernels
