// softmax(x)_j = exp(x_j − max x) / Σ_k exp(x_k − max x), over the last dim.
#include <cmath>
#include <limits>

#include "attn/error.hpp"
#include "attn/sdpa.hpp"

namespace attn::reference {

Tensor softmax(const Tensor& x) {
  ATTN_CHECK(x.defined(), "softmax of an undefined tensor");
  Tensor y = x.clone();
  const int64_t n = y.dim(-1);
  const int64_t rows = y.numel() / n;
  float* row = y.data();
  for (int64_t r = 0; r < rows; ++r, row += n) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) max = std::fmax(max, row[j]);
    if (max == -std::numeric_limits<float>::infinity()) {
      // Every entry is masked: no key to attend to. Zeros, not 0/0 = NaN.
      for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
      continue;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    for (int64_t j = 0; j < n; ++j) row[j] = static_cast<float>(row[j] / sum);
  }
  return y;
}

}  // namespace attn::reference
