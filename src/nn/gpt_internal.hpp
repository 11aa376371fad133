// What the GPT's source files share: where each block's tensors sit in the parameter buffer,
// the activations kept for the backward pass, dropout, and one block's forward and backward.
// Internal to the library.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/gemm.hpp"
#include "attn/gpt.hpp"
#include "attn/tensor.hpp"
#include "src/attention/layer.hpp"
#include "src/nn/gpt_layout.hpp"

namespace attn::nn {

inline const float* at_or_null(const float* base, int64_t offset) {
  return offset >= 0 ? base + offset : nullptr;
}
inline float* at_or_null(float* base, int64_t offset) {
  return offset >= 0 ? base + offset : nullptr;
}

// A block's attention as the layer core sees it: causal, Wo back to n_embd, RoPE when rotary.
inline detail::AttentionLayerShape attention_shape(const GptConfig& c) {
  return {c.n_embd,    c.n_head,
          c.n_kv_head, c.n_embd / c.n_head,
          c.n_embd,    c.positions == PositionKind::kRotary};
}

// What a block's attention masks: every query sees itself and the tokens before it.
inline SdpaOptions block_attention_options() {
  SdpaOptions options;
  options.causal = true;
  return options;
}

// Columns of the fused Q, K, V projection: (H + 2·H_kv)·d_head.
inline int64_t qkv_width(const GptConfig& c) { return attention_shape(c).qkv_width(); }

// The matrix at `offset` among the bf16 copies, or null when the matrices are float.
inline const uint16_t* bf16_at(const uint16_t* bf16, int64_t offset) {
  return bf16 ? bf16 + offset : nullptr;
}

enum class DropoutSite : uint64_t { kEmbedding = 1, kAttention = 2, kMlp = 3 };

// Inverted dropout whose mask is a hash of (seed, site, layer, element): the backward
// regenerates the forward's mask instead of storing it, and the mask does not depend on the
// thread count. Kept elements are scaled by 1/(1 − p).
class Dropout {
 public:
  // first_element: the hash index of x[0] (a data-parallel rank that runs windows from the
  // middle of a batch draws the masks the whole batch's forward would).
  void seed(float p, uint64_t seed, int64_t first_element = 0) {
    p_ = p;
    seed_ = seed;
    first_element_ = first_element;
  }
  // x[i] *= mask[first_element + i] for i in [0, n); nothing when p = 0.
  void apply(float* x, int64_t n, DropoutSite site, int64_t layer) const;
  // x with the mask applied, written into `into` and returned; x itself when p = 0, so that a
  // step without dropout copies nothing.
  const float* masked(const float* x, float* into, int64_t n, DropoutSite site,
                      int64_t layer) const;

 private:
  float p_ = 0.0f;
  uint64_t seed_ = 0;
  int64_t first_element_ = 0;
};

// One block's activations, all (rows = B·T, ·) row-major.
struct LayerActivations {
  Tensor ln1, ln1_mean, ln1_rstd;  // LayerNorm₁(x) and its row statistics
  Tensor qkv;                      // (B, T, width): projections, Q and K rotated when rotary
  Tensor att;                      // (B, T, H, d_head): attention output, heads merged
  Tensor lse;                      // (B, H, T): the attention's log-sum-exp
  Tensor residual2;                // x + attention branch
  Tensor ln2, ln2_mean, ln2_rstd;
  Tensor fch, fch_gelu;  // (rows, 4C): before and after GELU
  Tensor residual3;      // the block's output
  // A training step in bf16: the bits of each product's input (ln1, att, ln2, fch_gelu),
  // rounded once by the forward for its products and the backward's (empty otherwise).
  std::vector<uint16_t> ln1_bits, att_bits, ln2_bits, fch_gelu_bits;
};

// What a set of activations is for. Training keeps every layer's buffers for the backward and
// the backward's scratch; inference keeps one layer's buffers, reused by every layer in turn
// (block_forward may read its input from the buffers it writes), and no backward scratch:
// about 1/n_layer of the memory, so every inference call can afford its own.
enum class ActivationUse { kTraining, kInference };

// The buffers of one forward pass over (B, T) tokens, allocated once per (B, T) for training
// (Gpt keeps them from forward() to backward()) and once per call for inference (the call owns
// them, so calls on one model from several threads never share a buffer).
struct Activations {
  Activations(const GptConfig& config, int64_t batch, int64_t t, ActivationUse use);
  // Layer l's buffers: its own in training, the one shared set in inference.
  LayerActivations& layer(size_t l) { return layers.size() == 1 ? layers.front() : layers[l]; }
  int64_t batch, t, rows;
  std::vector<LayerActivations> layers;
  Tensor encoded;                  // token + position vectors (rows, C)
  Tensor lnf, lnf_mean, lnf_rstd;  // the final LayerNorm
  Tensor probs;                    // (rows, vocab): softmax of the logits, then dlogits
  // Backward scratch, shared by the layers (undefined for inference).
  Tensor d_residual, d_branch, d_ln, d_att, d_qkv, d_fch, scratch;
  std::vector<int64_t> ids, targets;
  Dropout dropout;
  Dtype precision = Dtype::kFloat32;  // of this pass's matrix products
  const uint16_t* bf16 = nullptr;     // the model's bf16 matrices, when it keeps them so
  bool has_forward = false;
  // A training step in bf16 (keep_rounded_operands): the parameters' bits, rounded once a step
  // (each product would round its weight again, on every thread), and lnf's; empty otherwise.
  std::vector<uint16_t> rounded_params, lnf_bits;

  // Makes room for the bf16 copies above (a training pass whose products are bf16), and
  // rounds the parameters into rounded_params; drop_rounded_operands frees them (a float pass).
  void keep_rounded_operands(const GptConfig& config, const float* params, int64_t count);
  void drop_rounded_operands();
  // A parameter's bits at `offset`, or null when the pass keeps none.
  const uint16_t* rounded_at(int64_t offset) const {
    return rounded_params.empty() ? nullptr : rounded_params.data() + offset;
  }
};

// Whether bf16 training passes keep the rounded copies above (the default), or let every
// product round its operands as it did before they were kept — for the test that the two give
// the same bits. Returns the previous setting.
bool keep_rounded_operands_for_test(bool keep);
bool rounded_operands_kept();

// The buffer's data, or null when empty (a pass that keeps no rounded copies).
inline uint16_t* data_or_null(std::vector<uint16_t>& bits) {
  return bits.empty() ? nullptr : bits.data();
}

// The block's attention weights inside the parameter buffer (and the bf16 copies of its
// matrices when bf16 is set: Gpt::set_weights_dtype; the step's rounded matrices when `pass`
// keeps them: a bf16 training step).
inline detail::AttentionLayerWeights attention_weights(const GptConfig& c, const LayerOffsets& at,
                                                       const float* params,
                                                       const uint16_t* bf16 = nullptr,
                                                       const Activations* pass = nullptr) {
  detail::AttentionLayerWeights w = detail::AttentionLayerWeights::packed(
      attention_shape(c), params + at.wqkv, at_or_null(params, at.bqkv), params + at.wo,
      at_or_null(params, at.bo));
  w.wqkv_bf16 = bf16_at(bf16, at.wqkv);
  w.wo_bf16 = bf16_at(bf16, at.wo);
  if (pass != nullptr) {
    w.wqkv_rounded = pass->rounded_at(at.wqkv);
    w.wo_rounded = pass->rounded_at(at.wo);
  }
  return w;
}

// The MLP of one block on rows of LayerNorm₂ output: hidden = ln·Wfc + bfc,
// activated = gelu(hidden), out = activated·Wproj + bproj (Wfc and Wproj read from bf16 when
// it is set).
// What a bf16 training step rounds once for the MLP's products (all null otherwise): the
// parameters' bits (Activations::rounded_params), and room for ln's and activated's.
struct MlpRounded {
  const uint16_t* params = nullptr;
  uint16_t* ln = nullptr;
  uint16_t* activated = nullptr;
};
void mlp_forward(const GptConfig& config, const LayerOffsets& at, const float* params,
                 const float* ln, int64_t rows, float* hidden, float* activated, float* out,
                 Dtype precision = Dtype::kFloat32, const uint16_t* bf16 = nullptr,
                 const MlpRounded& rounded = {});

// x may be la.residual3 (inference reuses one layer's buffers): x is read only before
// residual3 is written.
void block_forward(const GptConfig& config, const LayerOffsets& at, const float* params,
                   const float* x, LayerActivations& la, Activations& a, int64_t layer);
// a.d_residual holds dL/d(block output) and becomes dL/d(block input) = dL/dx.
void block_backward(const GptConfig& config, const LayerOffsets& at, const float* params,
                    float* grads, const float* x, LayerActivations& la, Activations& a,
                    int64_t layer);

}  // namespace attn::nn
