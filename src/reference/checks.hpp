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
  // Causal and window: the position of query 0 counted from key 0, from options.causal_align
  // (Tk − Tq or 0). Ring attention (src/distributed/) sets it for a piece of the sequence
  // against a piece of keys that starts elsewhere; the fused kernels read it from here.
  int64_t query_position0;
};

// A rank-2..4 tensor viewed as rank 4 by prepending size-1 dims (no copy).
Tensor as_rank4(const Tensor& t);

// Checks q, k, v and every option against them; throws attn::Error naming what is wrong.
AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const SdpaOptions& options);
// The same from the shapes alone (views of memory that is not float32: attn/sdpa_bfloat16.hpp).
AttentionDims check_attention(const Shape& q, const Shape& k, const Shape& v,
                              const SdpaOptions& options);

// softcap finite and >= 0; alibi_slopes and sinks empty or one finite value per query head.
// `where` starts the message.
void check_variants(const SdpaOptions& options, int64_t heads, const char* where);

// Refuses NaN and ±inf in q, k, v (src/reference/finite.hpp: attn's policy); `where` starts the
// message ("sdpa", "sdpa_backward").
void check_finite_qkv(const char* where, const Tensor& q, const Tensor& k, const Tensor& v);

// Refuses weights (…, Tq, Tk) that the reference path could not hold in the memory available
// (src/core/memory_limit.hpp): the weights returned, and each worker's scores and softmax of
// one head. `where` starts the message.
void check_weights_fit(const AttentionDims& dims, const Shape& weights_shape, const char* where);

// Checks that d_out (dL/dO) has the output's shape, (…, Tq, dv) for q (…, Tq, d).
void check_output_gradient(const Tensor& q, const AttentionDims& dims, const Tensor& d_out);

// The explicit mask as a (B, H, Tq, Tk) view with stride 0 on broadcast dims, or an undefined
// tensor when there is no mask. scores_shape is (…, Tq, Tk), the rank of q.
Tensor broadcast_mask(const Mask& mask, const Shape& scores_shape);

// Q's shape with the last dim replaced: (…, Tq, d) -> (…, Tq, width).
Shape with_last_dim(const Shape& q, int64_t width);
Shape with_last_dim(const Tensor& q, int64_t width);

}  // namespace attn::detail
