// See cross_entropy.hpp; the row loops are src/kernels/cross_entropy.cpp.
#include "src/nn/cross_entropy.hpp"

#include <vector>

#include "attn/error.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/cross_entropy.hpp"

namespace attn::nn {

double cross_entropy_forward(float* logits_to_probs, const int64_t* targets, int64_t rows,
                             int64_t vocab) {
  const detail::PhaseScope clock(Phase::kCrossEntropy);
  for (int64_t r = 0; r < rows; ++r) {
    ATTN_CHECK(targets[r] >= 0 && targets[r] < vocab, "cross_entropy: target ", targets[r],
               " at row ", r, " outside [0, ", vocab, ")");
  }
  std::vector<double> losses(static_cast<size_t>(rows));
  detail::parallel_ranges(rows, 32, [&](int64_t first, int64_t last) {
    kernels::softmax_cross_entropy_rows(logits_to_probs, targets, first, last, vocab,
                                        losses.data());
  });
  double total = 0.0;
  for (double l : losses) total += l;  // in row order: the same sum for every thread count
  return total;
}

void cross_entropy_backward(float* probs_to_dlogits, const int64_t* targets, int64_t rows,
                            int64_t vocab, float scale) {
  const detail::PhaseScope clock(Phase::kCrossEntropy);
  detail::parallel_ranges(rows, 32, [&](int64_t first, int64_t last) {
    kernels::cross_entropy_gradient_rows(probs_to_dlogits, targets, first, last, vocab, scale);
  });
}

}  // namespace attn::nn
