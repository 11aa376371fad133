// See gelu.hpp. With u = √(2/π)·(x + 0.044715·x³) and t = tanh(u):
//   gelu'(x) = ½·(1 + t) + ½·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)
#include "src/nn/gelu.hpp"

#include <cmath>

#include "src/nn/row_parallel.hpp"

namespace attn::nn {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

}  // namespace

void gelu_forward(const float* x, int64_t n, float* y) {
  parallel_ranges(n, 16384, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v)));
    }
  });
}

void gelu_backward(const float* dy, const float* x, int64_t n, float* dx) {
  parallel_ranges(n, 16384, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float v = x[i];
      const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
  });
}

}  // namespace attn::nn
