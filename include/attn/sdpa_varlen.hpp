// Packed variable-length batches: sequences of different lengths laid end to end, no padding,
// as FlashAttention's varlen functions and PyTorch's varlen_attn take them.
//
// Shapes: Q (Tq_total, H, d), K (Tk_total, Hkv, d), V (Tk_total, Hkv, dv), rows contiguous in
// the last dim. cu_seqlens_q = {0, Lq_0, Lq_0 + Lq_1, …, Tq_total} (N + 1 offsets), cu_seqlens_k
// likewise: sequence s is Q rows [cu_seqlens_q[s], cu_seqlens_q[s+1]) against K/V rows
// [cu_seqlens_k[s], cu_seqlens_k[s+1]). Each sequence is an attention problem of its own: causal
// and window within it (bottom-right aligned when its lengths differ, or as causal_align says),
// scale, softcap, alibi_slopes and sinks as in attn/sdpa.hpp. options.key_lengths, when given,
// holds one count per sequence (FlashAttention's seqused_k): sequence s attends to the first
// key_lengths[s] rows of its key slot only, as if its slot ended there (a cache slot longer than
// what it holds); the rest get zero gradients. Masks, key_starts and return_weights are not
// taken (an attn::Error). No work is spent on padding: there is none.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/tensor.hpp"

namespace attn {

// Output (Tq_total, H, dv) and logsumexp (Tq_total, H). Each sequence runs on strided views of
// its rows with the kernel attn::sdpa would give it alone — the fused forward, or for a decode
// step (fewer than 16 queries at the end of its keys, float products) the decode kernel, whose
// tasks split the keys over the threads — so its output is bitwise what sdpa gives its
// (1, H, L, d) form.
SdpaResult sdpa_varlen(const Tensor& q, const Tensor& k, const Tensor& v,
                       const std::vector<int64_t>& cu_seqlens_q,
                       const std::vector<int64_t>& cu_seqlens_k, const SdpaOptions& options = {});

// dQ, dK, dV in q's, k's and v's packed shapes (and dsinks with sinks), from the forward's
// output and logsumexp (Tq_total, H).
SdpaGradients sdpa_varlen_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& logsumexp, const Tensor& d_out,
                                   const std::vector<int64_t>& cu_seqlens_q,
                                   const std::vector<int64_t>& cu_seqlens_k,
                                   const SdpaOptions& options = {});

}  // namespace attn
