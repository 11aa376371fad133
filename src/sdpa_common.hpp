// What the reference and fused attention paths share: the argument checks and the views
// that put every input into (B, H, T, ·) form. Internal to the library.
#pragma once

#include <cstdint>

#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn::detail {

// Sizes of one attention problem viewed as (B, H, T, d).
struct AttentionDims {
  int64_t batch, heads, kv_heads, tq, tk, d, dv;
  float scale;  // resolved: options.scale or 1/√d
};

// A rank-2..4 tensor viewed as rank 4 by prepending size-1 dims (no copy).
Tensor as_rank4(const Tensor& t);

// Checks q, k, v and every option against them; throws attn::Error naming what is wrong.
AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const SdpaOptions& options);

// Checks that d_out (dL/dO) has the output's shape, (…, Tq, dv) for q (…, Tq, d).
void check_output_gradient(const Tensor& q, const AttentionDims& dims, const Tensor& d_out);

// The explicit mask as a (B, H, Tq, Tk) view with stride 0 on broadcast dims, or an undefined
// tensor when there is no mask. scores_shape is (…, Tq, Tk), the rank of q.
Tensor broadcast_mask(const Mask& mask, const Shape& scores_shape);

// Q's shape with the last dim replaced: (…, Tq, d) -> (…, Tq, width).
Shape with_last_dim(const Tensor& q, int64_t width);

// The fused forward into a given output view (Q's shape with dv last, contiguous rows), so
// that callers can pick the output's memory layout. dims: what check_attention(q, k, v,
// options) returned — the caller checks once (the check scans an additive mask's values).
// logsumexp: (…, Tq) contiguous or nullptr. Defined in src/sdpa.cpp.
void sdpa_into(const AttentionDims& dims, const Tensor& q, const Tensor& k, const Tensor& v,
               const SdpaOptions& options, const Tensor& out, float* logsumexp);

// The fused backward's loop order (src/kernels/flash_backward.hpp): one task per (batch, K/V
// head) when there are at least this many of them, else two passes over key and query blocks.
// Default: the machine's core count — not the thread count, because the two orders sum in
// different orders and the result must not depend on set_num_threads. Tests set it to reach
// both orders on any machine; 0 restores the default.
void set_backward_two_pass_below(int64_t pairs);
int64_t backward_two_pass_below();

// The fused backward into given gradient views (q's, k's and v's shapes, contiguous rows;
// every element is written). out: the forward's output; logsumexp: (…, Tq) contiguous, from
// the forward. dims: what check_attention(q, k, v, options) returned. Defined in
// src/sdpa_backward.cpp.
void sdpa_backward_into(const AttentionDims& dims, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const float* logsumexp,
                        const Tensor& d_out, const SdpaOptions& options, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv);

}  // namespace attn::detail
