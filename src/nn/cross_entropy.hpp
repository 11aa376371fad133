// Softmax cross-entropy over the last dim of (rows, vocab) logits, fused with its backward:
//   loss_r = logsumexp(logits_r) − logits_r[target_r],   dlogits_r = (softmax(logits_r) −
//   onehot)·scale
#pragma once

#include <cstdint>

namespace attn::nn {

// Returns Σ_r loss_r (in double) and overwrites logits with their softmax, which the backward
// needs. A target outside [0, vocab) throws attn::Error.
double cross_entropy_forward(float* logits_to_probs, const int64_t* targets, int64_t rows,
                             int64_t vocab);

// probs (from the forward) become dlogits = (probs − onehot(target))·scale, in place; for the
// mean loss over the rows, scale = 1/rows.
void cross_entropy_backward(float* probs_to_dlogits, const int64_t* targets, int64_t rows,
                            int64_t vocab, float scale);

}  // namespace attn::nn
