// Multi-head attention with the textbook convention Y = X·W (W is (d_in, d_out)).
//
//   Q = X·Wq, K = X·Wk, V = X·Wv                    (B, T, d_model)
//   split_heads: (B, T, d_model) -> (B, H, T, d_head), d_head = d_model / H
//   O_h = sdpa(Q_h, K_h, V_h)                       per head
//   merge_heads: (B, H, T, d_head) -> (B, T, d_model)
//   Y = O·Wo                                        (skipped when Wo is absent)
// x may also be (T, d_model) (one sequence); the output then has no batch dim either.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/gemm.hpp"
#include "attn/kv_cache.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn {

// (B, T, d_model) -> (B, H, T, d_head) as a view (a change of strides, no copy);
// (T, d_model) -> (H, T, d_head). Throws unless d_model divides by n_heads.
Tensor split_heads(const Tensor& x, int64_t n_heads);
// The inverse: (B, H, T, d_head) -> (B, T, H·d_head), (H, T, d_head) -> (T, H·d_head). Copies.
Tensor merge_heads(const Tensor& x);

struct MhaResult {
  Tensor output;   // (B, T, d_out) or (T, d_out)
  Tensor weights;  // (B, H, T, T) or (H, T, T); from attn::multi_head_attention only when
                   // options.return_weights (the reference path always returns them)
};

// What multi_head_attention takes beyond the textbook's matrices; every field is optional.
struct MhaExtras {
  // 0 = n_heads. Fewer (dividing n_heads): grouped-query attention, wk and wv are then
  // (d_model, n_kv_heads·d_head) and query head h uses K/V head h / (n_heads / n_kv_heads).
  int64_t n_kv_heads = 0;
  Tensor bq;          // (d_model): added to X·Wq; undefined = no bias
  Tensor bk;          // (n_kv_heads·d_head)
  Tensor bv;          // (n_kv_heads·d_head)
  Tensor bo;          // (d_out): added to O·Wo (needs wo)
  bool rope = false;  // rotary positions on Q and K (apply_rope; d_head must be even)
  float rope_base = 10000.0f;
};

// The projections of one head, each (d_model, d_head).
struct HeadProjections {
  Tensor wq, wk, wv;
};

namespace reference {

// wq, wk, wv: (d_model, d_model) (wk, wv narrower with extras.n_kv_heads); wo: (d_model,
// d_out), or an undefined Tensor{} for no output projection.
MhaResult multi_head_attention(const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options = {}, const MhaExtras& extras = {});

// The per-head form: every head has its own (d_model, d_head) projections, the head outputs
// are concatenated along the feature dim, then projected by wo (if defined). Equal to the
// form above when head h's matrices are column block h of wq, wk, wv.
MhaResult multi_head_attention_per_head(const Tensor& x, const std::vector<HeadProjections>& heads,
                                        const Tensor& wo, const SdpaOptions& options = {});

}  // namespace reference

// The fast path: one GEMM (oneDNN) against [Wq | Wk | Wv], the heads as strided views of its
// output, the fused attention kernel writing the merged (B, T, H, d_head) order directly, and
// one GEMM for Wo. Weights only when options.return_weights.
MhaResult multi_head_attention(const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options = {}, const MhaExtras& extras = {});

struct MhaConfig {
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 0;  // 0 = n_heads; fewer: grouped-query attention (must divide n_heads)
  bool bias = false;       // biases on the QKV and output projections
  bool rope = false;       // rotary position embeddings on Q and K (apply_rope)
  float rope_base = 10000.0f;
  uint64_t seed = 0;  // weights ~ N(0, 1/d_model) from this seed; biases 0
  // The arithmetic of the layer's matrix products (attn/gemm.hpp): kBFloat16 rounds their
  // operands to bfloat16 and sums in float, as the GPT's mixed-precision training does.
  Dtype precision = Dtype::kFloat32;
};

// What MultiHeadAttention::forward keeps for the backward pass (training).
struct MhaActivations {
  Tensor x;             // (B, T, d_model): the input
  Tensor qkv;           // (B, T, (H + 2·H_kv)·d_head): projections with biases, Q and K rotated
  Tensor attended;      // (B, T, H, d_head): the attention output, before Wo
  Tensor logsumexp;     // (B, H, T): from the fused forward
  SdpaOptions options;  // the options the forward ran with
};

// dL/d(everything) for a given dL/dY; the bias gradients are undefined when the layer has no
// biases.
struct MhaGradients {
  Tensor dx;     // (B, T, d_model)
  Tensor dwqkv;  // wqkv's shape
  Tensor dbqkv;  // bqkv's shape
  Tensor dwo;    // wo's shape
  Tensor dbo;    // bo's shape
};

// The multi-head attention layer: owns its parameters, runs a whole sequence or new tokens
// against a KVCache.
//   wqkv (d_model, (H + 2·H_kv)·d_head): Q's columns, then K's, then V's;
//   bqkv ((H + 2·H_kv)·d_head) and bo (d_model) when config.bias, else undefined;
//   wo (H·d_head, d_model).
class MultiHeadAttention {
 public:
  explicit MultiHeadAttention(const MhaConfig& config);

  const MhaConfig& config() const { return config_; }
  int64_t head_dim() const { return config_.d_model / config_.n_heads; }
  int64_t kv_heads() const { return config_.n_kv_heads; }

  // A whole sequence: x (B, T, d_model) -> (B, T, d_model). options as for sdpa (e.g. causal).
  Tensor forward(const Tensor& x, const SdpaOptions& options = {}) const;
  // The same, keeping in `saved` what backward needs.
  Tensor forward(const Tensor& x, const SdpaOptions& options, MhaActivations& saved) const;
  // The gradients for dL/dY = d_y (B, T, d_model), through Wo, the fused attention backward,
  // RoPE (rotated back) and Wqkv. `saved` comes from forward(x, options, saved) on this layer
  // with these weights.
  MhaGradients backward(const MhaActivations& saved, const Tensor& d_y) const;
  // The attention weights (B, H, T, T) this layer gives x under options: what the forward's
  // softmax computes, materialised through the reference path (forward() never builds them).
  Tensor attention_weights(const Tensor& x, const SdpaOptions& options = {}) const;
  // New tokens: x (B, T_new, d_model) sits at positions cache.position() … + T_new − 1. Their
  // keys and values (rotated when rope is on) are appended to the cache, then the queries
  // attend causally to everything cached (attend_cached).
  Tensor forward(const Tensor& x, KVCache& cache, const SdpaOptions& options = {}) const;
  // A cache shaped for this layer.
  KVCache make_cache(int64_t batch, int64_t capacity, Dtype dtype = Dtype::kFloat32,
                     int64_t window = 0) const;

  Tensor wqkv, bqkv, wo, bo;

 private:
  MhaConfig config_;
};

}  // namespace attn
