// The backward pass of scaled dot-product attention: given dL/dO, the gradients of a loss L
// with respect to Q, K and V. With P the attention weights, O = P·V and s the scale:
//   dV = Pᵀ·dO
//   dP = dO·Vᵀ
//   dS = P ∘ (dP − D),   D_i = Σ_e dO_ie·O_ie  (= Σ_j P_ij·dP_ij: the softmax Jacobian per row)
//   dQ = s·dS·K
//   dK = s·dSᵀ·Q
// Grouped-query attention: a K/V head's gradients sum over the query heads that share it.
// Masked scores have P = 0, so they pass no gradient; a query that sees no key gets dQ = 0.
// Every SdpaOptions field is honoured as in the forward (causal, window, boolean or additive
// mask, key_lengths, key_starts, scale, softcap, alibi_slopes, sinks); with
// options.return_mask_gradient, also the gradient of an additive mask: dS itself (the mask is
// added to the scores after scaling and soft-capping), summed over its broadcast dims.
// Variants: with soft-capping, dS is multiplied by 1 − tanh²(s/c) before dQ and dK; with
// sinks, dS is unchanged (D already holds them: O is built from the weights that include the
// sink) and the sink of head h gets dsink_h = −Σ_{b,i} e^{sink_h − logsumexp_bhi}·D_bhi.
#pragma once

#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn {

struct SdpaGradients {
  Tensor dq;      // q's shape
  Tensor dk;      // k's shape
  Tensor dv;      // v's shape
  Tensor dsinks;  // (H,) when options.sinks is given, else undefined
  Tensor dmask;   // the mask's shape, with options.return_mask_gradient; else undefined
};

namespace reference {

// The readable path: runs reference::sdpa for P and O, then the formulas above one matrix
// product at a time. Memory O(Tq·Tk) per head.
SdpaGradients sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_out,
                            const SdpaOptions& options = {});

}  // namespace reference

// The fused backward (FlashAttention-2 style): P is recomputed block by block from the
// forward's logsumexp, exp(S − logsumexp), so the Tq × Tk matrix is never built and the extra
// memory is a fixed scratch per thread, independent of T.
//   out, logsumexp: what attn::sdpa(q, k, v, options) returned (output and logsumexp);
//   d_out: dL/dO, out's shape.
// Threads split the (batch, K/V head) pairs: each owns its dK, dV rows and its query heads'
// dQ rows, so the result does not depend on the thread count (bitwise).
SdpaGradients sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& logsumexp, const Tensor& d_out,
                            const SdpaOptions& options = {});

// The same with the additive mask's gradient written into `dmask`, a buffer the caller keeps
// (contiguous, the mask's shape, sharing no memory with the inputs or the mask); the result's
// dmask is `dmask` itself (return_mask_gradient is implied). For a learned (H, T, T) bias in a
// training loop: a new gradient tensor per call lies on fresh pages, which the system zeroes
// as they are first written — with one kept buffer the kernels write every element instead,
// zeros where no query sees the key (docs/performance.md has both costs).
SdpaGradients sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& logsumexp, const Tensor& d_out,
                            const SdpaOptions& options, const Tensor& dmask);

}  // namespace attn
