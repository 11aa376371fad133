// One head's attention scores before the softmax, every SdpaOptions rule applied in the order
// attn/sdpa.hpp gives, and the softmax with an attention sink: what the reference forward and
// backward share. Internal to the library.
#pragma once

#include <cstdint>

#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"
#include "src/reference/checks.hpp"

namespace attn::detail {

struct HeadScores {
  Tensor scores;         // (Tq, Tk): -inf where a key is hidden
  Tensor softcap_slope;  // (Tq, Tk) d(capped)/d(raw) = 1 − tanh²(s / c); undefined without softcap
};

// The scores of query head h of batch entry b: q_h (Tq, d), k_h (Tk, d) its K/V head's keys,
// mask_h the explicit mask's (Tq, Tk) view for this head, or undefined.
HeadScores head_scores(const Tensor& q_h, const Tensor& k_h, const Tensor& mask_h,
                       const AttentionDims& dims, const SdpaOptions& options, int64_t b, int64_t h);

// softmax over the last dim with `sink` as one more logit in every denominator (no output of
// its own): p_j = e^{s_j} / (e^{sink} + Σ_k e^{s_k}). A row of -inf gives zeros.
Tensor softmax_with_sink(const Tensor& scores, float sink);

}  // namespace attn::detail
