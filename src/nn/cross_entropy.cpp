// See cross_entropy.hpp. Each row is max-subtracted before exp, so large logits never overflow.
#include "src/nn/cross_entropy.hpp"

#include <cmath>
#include <vector>

#include "attn/error.hpp"
#include "src/nn/row_parallel.hpp"

namespace attn::nn {

double cross_entropy_forward(float* logits_to_probs, const int64_t* targets, int64_t rows,
                             int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    ATTN_CHECK(targets[r] >= 0 && targets[r] < vocab, "cross_entropy: target ", targets[r],
               " at row ", r, " outside [0, ", vocab, ")");
  }
  std::vector<double> losses(static_cast<size_t>(rows));
  parallel_ranges(rows, 32, [&](int64_t first, int64_t last) {
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
      losses[static_cast<size_t>(r)] = std::log(static_cast<double>(sum)) + max - target_logit;
    }
  });
  double total = 0.0;
  for (double l : losses) total += l;  // in row order: the same sum for every thread count
  return total;
}

void cross_entropy_backward(float* probs_to_dlogits, const int64_t* targets, int64_t rows,
                            int64_t vocab, float scale) {
  parallel_ranges(rows, 32, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      float* row = probs_to_dlogits + r * vocab;
      row[targets[r]] -= 1.0f;
      for (int64_t i = 0; i < vocab; ++i) row[i] *= scale;
    }
  });
}

}  // namespace attn::nn
