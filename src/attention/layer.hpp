// The one multi-head attention layer core: every caller that runs a whole attention layer —
// attn::multi_head_attention, MultiHeadAttention (forward, backward, decode) and the GPT's
// blocks — runs these functions, so a change to the layer (a position kind, a precision, a
// mask option) is made once. Internal to the library; plain pointers and row-major buffers,
// so the GPT can point it into its parameter buffer.
//
//   forward                                    backward (in reverse)
//   QKV = X·Wqkv + bqkv     (B·T, width)       dWqkv += Xᵀ·dQKV, dbqkv += Σ dQKV, dX = dQKV·Wqkvᵀ
//   Q, K rotated (RoPE)                        dQ, dK rotated back (the transpose of a rotation)
//   A = sdpa(Q, K, V)       (B, T, H, d_head)  dQ, dK, dV = the fused backward of dA
//   Y = A·Wo + bo           (B·T, d_out)       dWo += Aᵀ·dY, dbo += Σ dY, dA = dY·Woᵀ
//
// Dimension legend: B batch, T tokens, H query heads, Hkv key/value heads, d_head = head_dim,
// width = (H + 2·Hkv)·d_head (Q's columns, then K's, then V's).
#pragma once

#include <cstdint>

#include "attn/gemm.hpp"
#include "attn/kv_cache.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn::detail {

struct AttentionLayerShape {
  int64_t d_model;    // X's width
  int64_t heads;      // H
  int64_t kv_heads;   // Hkv, dividing H
  int64_t head_dim;   // d_head
  int64_t d_out;      // Y's width (Wo's columns)
  bool rope = false;  // rotary positions on Q and K
  float rope_base = 10000.0f;

  int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t merged_width() const { return heads * head_dim; }  // A's row: the heads side by side
};

// Row-major weights. The Q, K and V projections are three (d_model, ·) matrices with row
// strides ld_q, ld_k, ld_v — separate ones, or the column blocks of one (d_model, width)
// matrix [Wq | Wk | Wv] (packed()); either way their products are written into the columns of
// one QKV buffer. The biases bq (H·d_head), bk, bv (Hkv·d_head), wo (H·d_head, d_out) and bo
// (d_out) may be null: no bias, no output projection (then Y is A itself).
struct AttentionLayerWeights {
  const float* wq = nullptr;
  const float* wk = nullptr;
  const float* wv = nullptr;
  int64_t ld_q = 0, ld_k = 0, ld_v = 0;
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* wo = nullptr;
  const float* bo = nullptr;
  // A model that keeps its matrices in bfloat16 (Gpt's bf16 weights): the forward and decode
  // products read these instead of wq…wv (the packed form: one (d_model, width) matrix) and wo,
  // whose float pointers then only describe the layout. The backward refuses them.
  const uint16_t* wqkv_bf16 = nullptr;
  const uint16_t* wo_bf16 = nullptr;
  // A training step in bf16 (Dtype::kBFloat16 products): the float matrices' bits, rounded once
  // for the step (the packed form and wo, as above), or null to have each product round them.
  const uint16_t* wqkv_rounded = nullptr;
  const uint16_t* wo_rounded = nullptr;

  // The single-matrix form: wqkv (d_model, width), bqkv (width) or null.
  static AttentionLayerWeights packed(const AttentionLayerShape& shape, const float* wqkv,
                                      const float* bqkv, const float* wo, const float* bo);
};

// Gradients, added into (+=); null biases are skipped.
struct AttentionLayerGradients {
  float* wqkv;
  float* bqkv;
  float* wo;
  float* bo;
};

// What a forward writes and its backward reads.
struct AttentionLayerState {
  Tensor qkv;        // (B, T, width): the projections with biases, Q and K rotated
  Tensor attended;   // (B, T, H, d_head): A, the heads merged
  float* logsumexp;  // (B, H, T) contiguous, or nullptr when no backward follows
  // With bf16 products, room for X's and A's bits (B·T·d_model and B·T·H·d_head), which the
  // forward rounds once for its products and the backward reuses; null: rounded per product.
  uint16_t* x_rounded = nullptr;
  uint16_t* attended_rounded = nullptr;
};

enum class QkvPart { kQuery, kKey, kValue };

// One part of a (B, T, width) QKV buffer as (B, heads, T, d_head), by strides alone: Q with H
// heads, K and V with Hkv.
Tensor qkv_heads(const AttentionLayerShape& shape, const Tensor& qkv, QkvPart part);

// The whole sequence: x (B·T, d_model) contiguous -> state (qkv, attended, logsumexp) and,
// when weights.wo is set, y (B·T, d_out). options as for sdpa (causal, window, mask…).
void attention_layer_forward(const AttentionLayerShape& shape, const AttentionLayerWeights& weights,
                             const float* x, const SdpaOptions& options, Dtype precision,
                             AttentionLayerState& state, float* y);

// The attention weights (B, H, T, T) of the queries and keys a forward left in qkv (Q and K
// already rotated), under the same options: the reference softmax, materialised only when a
// caller asks to see them — the forward itself never builds a T × T matrix.
Tensor attention_layer_weights(const AttentionLayerShape& shape, const Tensor& qkv,
                               const SdpaOptions& options);

// Scratch the backward needs, shaped like the forward's state (the GPT keeps one set for all
// its layers).
struct AttentionLayerScratch {
  Tensor d_qkv;       // (B, T, width)
  Tensor d_attended;  // (B, T, H, d_head)
};

// dL/dY = d_y (B·T, d_out) -> the weight gradients (added into `grads`) and dL/dX into d_x
// (B·T, d_model; overwritten, or added to when accumulate_dx). The weights must be the
// single-matrix form and wo set. state: what attention_layer_forward left, with these
// weights and options.
void attention_layer_backward(const AttentionLayerShape& shape,
                              const AttentionLayerWeights& weights, const float* x,
                              const AttentionLayerState& state, const float* d_y,
                              const SdpaOptions& options, Dtype precision,
                              AttentionLayerScratch& scratch, float* d_x, bool accumulate_dx,
                              const AttentionLayerGradients& grads);

// New tokens x (B, T_new, d_model) at positions cache.position() … + T_new − 1: their keys and
// values (rotated when shape.rope) are appended to the cache, the queries attend to what it
// holds (attend_cached), and y (B·T_new, d_out) = A·Wo + bo. wo must be set. With
// last_query_only, every new key and value still enters the cache but only each sequence's
// last query attends, and y is (B, d_out): a model's last layer needs no more to choose the
// next token.
void attention_layer_decode(const AttentionLayerShape& shape, const AttentionLayerWeights& weights,
                            const Tensor& x, KVCache& cache, const SdpaOptions& options,
                            Dtype precision, float* y, bool last_query_only = false);

// A cache shaped for the layer.
KVCache make_layer_cache(const AttentionLayerShape& shape, int64_t batch, int64_t capacity,
                         Dtype dtype, int64_t window);

}  // namespace attn::detail
