// Cross-entropy's row loops (formulas in src/nn/cross_entropy.hpp), compiled at the kernels'
// -O3 so that the max, the scaling and the gradient loops vectorise. The caller checks the
// targets and splits the rows over threads.
#pragma once

#include <cstdint>

namespace attn::kernels {

// Rows [first, last) of (rows, vocab): softmax in place, loss_r into losses[r].
void softmax_cross_entropy_rows(float* logits_to_probs, const int64_t* targets, int64_t first,
                                int64_t last, int64_t vocab, double* losses);

// Rows [first, last): probs become (probs − onehot(target))·scale, in place.
void cross_entropy_gradient_rows(float* probs_to_dlogits, const int64_t* targets, int64_t first,
                                 int64_t last, int64_t vocab, float scale);

}  // namespace attn::kernels
