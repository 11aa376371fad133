// Multi-head attention with the textbook convention Y = X·W (W is (d_in, d_out)): the fast path
// and the layer object. The shapes, the split and merge, the extras and the reference path are
// in attn/mha_reference.hpp, which this includes.
#pragma once

#include <cstdint>

#include "attn/gemm.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mha_reference.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn {

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
  int64_t n_kv_heads() const { return config_.n_kv_heads; }

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
