// See cross_entropy.hpp. Each row is max-subtracted before exp, so large logits never overflow.
#include "src/kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

namespace attn::kernels {

void softmax_cross_entropy_rows(float* logits_to_probs, const int64_t* targets, int64_t first,
                                int64_t last, int64_t vocab, double* losses) {
  for (int64_t r = first; r < last; ++r) {
    float* row = logits_to_probs + r * vocab;
    float max = row[0];
    for (int64_t i = 1; i < vocab; ++i) max = std::max(max, row[i]);
    const float target_logit = row[targets[r]];
    float sum = 0.0f;
    for (int64_t i = 0; i < vocab; ++i) {
      row[i] = std::exp(row[i] - max);
      sum += row[i];
    }
    const float inverse = 1.0f / sum;
    for (int64_t i = 0; i < vocab; ++i) row[i] *= inverse;
    losses[r] = std::log(static_cast<double>(sum)) + max - target_logit;
  }
}

void cross_entropy_gradient_rows(float* probs_to_dlogits, const int64_t* targets, int64_t first,
                                 int64_t last, int64_t vocab, float scale) {
  for (int64_t r = first; r < last; ++r) {
    float* row = probs_to_dlogits + r * vocab;
    row[targets[r]] -= 1.0f;
    for (int64_t i = 0; i < vocab; ++i) row[i] *= scale;
  }
}

}  // namespace attn::kernels
