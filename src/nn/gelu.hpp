// GELU in its tanh form (GPT-2's, torch.nn.GELU(approximate="tanh")):
//   gelu(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
#pragma once

#include <cstdint>

namespace attn::nn {

void gelu_forward(const float* x, int64_t n, float* y);

// dx = dy · gelu'(x). dx may alias dy.
void gelu_backward(const float* dy, const float* x, int64_t n, float* dx);

}  // namespace attn::nn
