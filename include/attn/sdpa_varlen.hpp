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

// Packed queries against a paged K/V cache — PyTorch's varlen_attn with a block_table, vLLM's
// layout: k_pages and v_pages (pages, page_size, Hkv, d); sequence s's keys are the first
// seqused_k[s] tokens of the pages block_table[s][0], block_table[s][1], … in that order, and
// its queries q rows [cu_seqlens_q[s], cu_seqlens_q[s+1]) as in sdpa_varlen (causal and the
// window bottom-right aligned within the sequence, the variants). A decode step (fewer than 16
// queries at the end of its keys, float products) reads the pages in place, on the decode
// kernel; any other sequence's pages are gathered into consecutive rows for attn::sdpa. Either
// way each sequence's output is bitwise sdpa's on its keys gathered. Forward only; masks,
// key_lengths, key_starts and weights are an attn::Error.
SdpaResult sdpa_varlen_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                             const std::vector<int64_t>& cu_seqlens_q,
                             const std::vector<std::vector<int64_t>>& block_table,
                             const std::vector<int64_t>& seqused_k,
                             const SdpaOptions& options = {});

}  // namespace attn
