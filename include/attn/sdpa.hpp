// Scaled dot-product attention: softmax(Q·Kᵀ·scale + mask)·V.
//
// Shapes: Q (…, Tq, d), K (…, Tk, d), V (…, Tk, dv), rank 2..4, all three the same rank.
// The leading dims of Q, K and V are equal, except the last leading dim (the head dim) of
// K and V, which may divide Q's: grouped-query attention, query head h uses K/V head
// h / (H / H_kv) (as PyTorch's enable_gqa, i.e. repeat_interleave of K/V heads).
// Output (…, Tq, dv); weights (…, Tq, Tk). A query row that can see no key gets an output of
// zeros and weights of zeros, never NaN.
//
// The score of query i and key j, in the order the steps apply (docs/library.md "Variants"):
//   s = scale·q_i·k_j;  s = c·tanh(s / c) (softcap);  s += −slope_h·|pos_i − j| (ALiBi);
//   s = -inf where causal/window/padding/a boolean mask hide the key;  s += additive mask;
//   p_j = e^{s_j} / (e^{sink_h} + Σ_k e^{s_k})  (the sink term only with sinks).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "attn/dtype.hpp"
#include "attn/mask.hpp"
#include "attn/tensor.hpp"

namespace attn {

struct SdpaOptions {
  std::optional<float> scale;  // default 1/√d
  bool causal = false;         // query i sees keys j ≤ its position (see causal_align)
  // Where queries sit for causal and window when Tq ≠ Tk (mask.hpp): bottom-right (query i at
  // Tk − Tq + i; the default, what a KV cache needs) or top-left (query i at i: PyTorch's
  // is_causal).
  CausalAlign causal_align = CausalAlign::kBottomRight;
  int64_t window = 0;  // > 0: sliding-window causal, keys p − window < j ≤ p
  Mask mask;           // explicit boolean or additive mask, broadcast to (…, Tq, Tk)
  // Padding: one length per batch entry (B = dim 0 of rank-4 inputs, else 1); keys
  // j ≥ key_lengths[b] are hidden. Empty = every key is real.
  std::vector<int64_t> key_lengths;
  // Left padding (a batch of prompts aligned at their ends, as Hugging Face pads for
  // generation): one first real key per batch entry; keys j < key_starts[b] are hidden.
  // Empty = none. With causal, a query before its entry's first key sees nothing (zeros).
  std::vector<int64_t> key_starts;
  // Soft-capping (Gemma 2): c > 0 caps every scaled score to c·tanh(s / c), before the ALiBi
  // bias and the mask. 0 = off.
  float softcap = 0.0f;
  // ALiBi (BLOOM, MPT): one slope per query head (H of them); the score of query i and key j
  // gains −slope·|pos_i − j|, pos_i = the query's position (causal_align: Tk − Tq + i by
  // default). Computed from the indices: no (Tq, Tk) bias is built. Empty = off.
  std::vector<float> alibi_slopes;
  // Attention sinks (gpt-oss): one logit per query head (H), in every softmax denominator and
  // nowhere else, so a row's weights sum to 1 − e^{sink − logsumexp}; the logsumexp includes it
  // (a row that sees no key gets logsumexp = sink and zeros). Empty = off.
  std::vector<float> sinks;
  // attn::sdpa only: also materialise the (…, Tq, Tk) weights (through the reference path;
  // the fused kernel itself never builds them). reference::sdpa always returns them.
  bool return_weights = false;
  // sdpa_backward only: also the gradient of an additive mask (a learned bias), dL/d(mask) =
  // dS = P ∘ (dP − D), summed over the dims the mask is broadcast along, in the mask's shape
  // (SdpaGradients::dmask). A boolean mask has none: asking is an attn::Error.
  bool return_mask_gradient = false;
  // The products' operands (attn/dtype.hpp): kFloat32, or kBFloat16 — Q, K, V (and dO in the
  // backward) rounded to bfloat16, and P (and dS) rounded before the products that take them;
  // sums, the softmax and everything element-wise stay float32. The same roundings on every
  // CPU (docs/design.md: the error bound). Not for a KV cache (its dtype is its storage).
  Dtype precision = Dtype::kFloat32;
};

struct SdpaResult {
  Tensor output;     // (…, Tq, dv)
  Tensor weights;    // (…, Tq, Tk); undefined from attn::sdpa unless return_weights
  Tensor logsumexp;  // (…, Tq): log Σ_j exp(score_ij), +inf for a row with no visible key;
                     // from attn::sdpa only
};

namespace reference {

// Softmax over the last dim, max-subtracted. A row that is entirely -inf becomes zeros.
Tensor softmax(const Tensor& x);

// The readable path: scores, mask, softmax, weighted sum, one formula per step.
SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options = {});

}  // namespace reference

// The library's default path: the fused kernel (tiled, online softmax; the T×T scores are
// never stored; docs/design.md). Weights, when options.return_weights asks, come from the
// reference path.
SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options = {});

}  // namespace attn
