// One transformer block, forward and backward, over the buffers of nn::Activations:
//
//   forward                                   backward (in reverse)
//   ln1  = LayerNorm₁(x)                      dx  += LayerNorm₁ᵀ(d_ln1)
//   qkv  = ln1·Wqkv + bqkv  (RoPE on Q, K)    d_ln1 = d_qkv·Wqkvᵀ, dWqkv += ln1ᵀ·d_qkv
//   att  = attention(Q, K, V)  (fused)        d_qkv = fused attention backward(d_att)
//   r2   = x + drop(att·Wo + bo)              d_att = drop(d_r2)·Woᵀ, dWo += attᵀ·drop(d_r2)
//   ln2  = LayerNorm₂(r2)                     d_r2 += LayerNorm₂ᵀ(d_ln2)
//   fch  = ln2·Wfc + bfc,  g = gelu(fch)      d_ln2 = d_fch·Wfcᵀ, d_fch = gelu'·(d_g)
//   r3   = r2 + drop(g·Wproj + bproj)         d_g = drop(d_r3)·Wprojᵀ
// The residual gradient flows straight through both additions (d_r2 starts as d_r3). The
// attention rows (qkv, att, Wo) are the one attention layer core (src/attention/layer.hpp).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "attn/sdpa.hpp"
#include "src/attention/layer.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/kernels/add_rows.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/linalg/linear.hpp"
#include "src/nn/gelu.hpp"
#include "src/nn/gpt_internal.hpp"
#include "src/nn/layer_norm.hpp"

namespace attn::nn {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void add_into(const float* a, const float* b, int64_t n, float* out) {
  detail::parallel_ranges(n, 16384, [&](int64_t first, int64_t last) {
    kernels::add_rows(a + first, 0, b + first, 0, 1, last - first, out + first, 0);
  });
}

}  // namespace

void Dropout::apply(float* x, int64_t n, DropoutSite site, int64_t layer) const {
  if (p_ <= 0.0f) return;
  const float keep_scale = 1.0f / (1.0f - p_);
  // An element is dropped when its 24-bit hash falls below p·2²⁴.
  const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(p_) * 16777216.0);
  const uint64_t stream = splitmix64(seed_ ^ (static_cast<uint64_t>(site) << 56) ^
                                     (static_cast<uint64_t>(layer) << 40));
  detail::parallel_ranges(n, 16384, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const uint64_t element = static_cast<uint64_t>(first_element_ + i);
      const bool drop = (splitmix64(stream + element) >> 40) < threshold;
      x[i] = drop ? 0.0f : x[i] * keep_scale;
    }
  });
}

const float* Dropout::masked(const float* x, float* into, int64_t n, DropoutSite site,
                             int64_t layer) const {
  if (p_ <= 0.0f) return x;
  detail::parallel_ranges(
      n, 16384, [&](int64_t first, int64_t last) { std::copy(x + first, x + last, into + first); });
  apply(into, n, site, layer);
  return into;
}

Activations::Activations(const GptConfig& config, int64_t batch_, int64_t t_, ActivationUse use)
    : batch(batch_), t(t_), rows(batch_ * t_) {
  const int64_t c = config.n_embd, width = qkv_width(config), h = config.n_head;
  const int64_t layer_sets = use == ActivationUse::kTraining ? config.n_layer : 1;
  for (int64_t l = 0; l < layer_sets; ++l) {
    LayerActivations la;
    la.ln1 = Tensor({rows, c});
    la.ln1_mean = Tensor({rows});
    la.ln1_rstd = Tensor({rows});
    la.qkv = Tensor({batch, t, width});
    la.att = Tensor({batch, t, h, c / h});
    la.lse = Tensor({batch, h, t});
    la.residual2 = Tensor({rows, c});
    la.ln2 = Tensor({rows, c});
    la.ln2_mean = Tensor({rows});
    la.ln2_rstd = Tensor({rows});
    la.fch = Tensor({rows, 4 * c});
    la.fch_gelu = Tensor({rows, 4 * c});
    la.residual3 = Tensor({rows, c});
    layers.push_back(std::move(la));
  }
  encoded = Tensor({rows, c});
  lnf = Tensor({rows, c});
  lnf_mean = Tensor({rows});
  lnf_rstd = Tensor({rows});
  probs = Tensor({rows, config.vocab_size});
  scratch = Tensor({rows, c});
  if (use == ActivationUse::kInference) return;
  d_residual = Tensor({rows, c});
  d_branch = Tensor({rows, c});
  d_ln = Tensor({rows, c});
  d_att = Tensor({batch, t, h, c / h});
  d_qkv = Tensor({batch, t, width});
  d_fch = Tensor({rows, 4 * c});
}

void mlp_forward(const GptConfig& config, const LayerOffsets& at, const float* params,
                 const float* ln, int64_t rows, float* hidden, float* activated, float* out,
                 Dtype precision, const uint16_t* bf16, const MlpRounded& rounded) {
  const int64_t c = config.n_embd;
  detail::linear_forward(ln, params + at.wfc, bf16_at(bf16, at.wfc), at_or_null(params, at.bfc),
                         rows, c, 4 * c, hidden, precision,
                         {bf16_at(rounded.params, at.wfc), rounded.ln});
  gelu_forward(hidden, rows * 4 * c, activated);
  detail::linear_forward(activated, params + at.wproj, bf16_at(bf16, at.wproj),
                         at_or_null(params, at.bproj), rows, 4 * c, c, out, precision,
                         {bf16_at(rounded.params, at.wproj), rounded.activated});
}

namespace {
std::atomic<bool> g_keep_rounded_operands{true};
}  // namespace

bool keep_rounded_operands_for_test(bool keep) { return g_keep_rounded_operands.exchange(keep); }
bool rounded_operands_kept() { return g_keep_rounded_operands.load(); }

void Activations::drop_rounded_operands() {
  rounded_params = {};
  lnf_bits = {};
  for (LayerActivations& la : layers) {
    la.ln1_bits = {};
    la.att_bits = {};
    la.ln2_bits = {};
    la.fch_gelu_bits = {};
  }
}

void Activations::keep_rounded_operands(const GptConfig& config, const float* params,
                                        int64_t count) {
  const auto c = static_cast<size_t>(config.n_embd), n = static_cast<size_t>(rows);
  rounded_params.resize(static_cast<size_t>(count));
  uint16_t* bits = rounded_params.data();
  detail::parallel_ranges(count, 16384, [&](int64_t first, int64_t last) {
    kernels::round_to_bfloat16(params + first, 1, last - first, last - first, bits + first);
  });
  lnf_bits.resize(n * c);
  for (LayerActivations& la : layers) {
    la.ln1_bits.resize(n * c);
    la.att_bits.resize(n * c);
    la.ln2_bits.resize(n * c);
    la.fch_gelu_bits.resize(n * 4 * c);
  }
}

void block_forward(const GptConfig& config, const LayerOffsets& at, const float* params,
                   const float* x, LayerActivations& la, Activations& a, int64_t layer) {
  const int64_t rows = a.rows, c = config.n_embd;
  layer_norm_forward(x, params + at.ln1_w, at_or_null(params, at.ln1_b), rows, c, la.ln1.data(),
                     la.ln1_mean.data(), la.ln1_rstd.data());
  float* branch = a.scratch.data();
  detail::AttentionLayerState state{la.qkv, la.att, la.lse.data(), data_or_null(la.ln1_bits),
                                    data_or_null(la.att_bits)};
  detail::attention_layer_forward(attention_shape(config),
                                  attention_weights(config, at, params, a.bf16, &a), la.ln1.data(),
                                  block_attention_options(), a.precision, state, branch);
  a.dropout.apply(branch, rows * c, DropoutSite::kAttention, layer);
  add_into(x, branch, rows * c, la.residual2.data());

  layer_norm_forward(la.residual2.data(), params + at.ln2_w, at_or_null(params, at.ln2_b), rows, c,
                     la.ln2.data(), la.ln2_mean.data(), la.ln2_rstd.data());
  mlp_forward(config, at, params, la.ln2.data(), rows, la.fch.data(), la.fch_gelu.data(), branch,
              a.precision, a.bf16,
              {a.rounded_at(0), data_or_null(la.ln2_bits), data_or_null(la.fch_gelu_bits)});
  a.dropout.apply(branch, rows * c, DropoutSite::kMlp, layer);
  add_into(la.residual2.data(), branch, rows * c, la.residual3.data());
}

void block_backward(const GptConfig& config, const LayerOffsets& at, const float* params,
                    float* grads, const float* x, LayerActivations& la, Activations& a,
                    int64_t layer) {
  const int64_t rows = a.rows, c = config.n_embd;
  // Each branch's output gradient: the residual's, through the branch's dropout mask (the
  // residual's own buffer, read before LayerNorm's backward adds to it, when there is none).
  const float* d_branch =
      a.dropout.masked(a.d_residual.data(), a.d_branch.data(), rows * c, DropoutSite::kMlp, layer);

  // MLP branch.
  detail::linear_backward(d_branch, la.fch_gelu.data(), params + at.wproj, rows, 4 * c, c,
                          a.d_fch.data(), false, grads + at.wproj, at_or_null(grads, at.bproj),
                          a.precision, {a.rounded_at(at.wproj), data_or_null(la.fch_gelu_bits)});
  gelu_backward(a.d_fch.data(), la.fch.data(), rows * 4 * c, a.d_fch.data());
  detail::linear_backward(a.d_fch.data(), la.ln2.data(), params + at.wfc, rows, c, 4 * c,
                          a.d_ln.data(), false, grads + at.wfc, at_or_null(grads, at.bfc),
                          a.precision, {a.rounded_at(at.wfc), data_or_null(la.ln2_bits)});
  layer_norm_backward(a.d_ln.data(), la.residual2.data(), params + at.ln2_w, la.ln2_mean.data(),
                      la.ln2_rstd.data(), rows, c, a.d_residual.data(), grads + at.ln2_w,
                      at_or_null(grads, at.ln2_b));

  // Attention branch.
  d_branch = a.dropout.masked(a.d_residual.data(), a.d_branch.data(), rows * c,
                              DropoutSite::kAttention, layer);
  const detail::AttentionLayerState state{la.qkv, la.att, la.lse.data(), data_or_null(la.ln1_bits),
                                          data_or_null(la.att_bits)};
  detail::AttentionLayerScratch scratch{a.d_qkv, a.d_att};
  const detail::AttentionLayerGradients into{grads + at.wqkv, at_or_null(grads, at.bqkv),
                                             grads + at.wo, at_or_null(grads, at.bo)};
  detail::attention_layer_backward(
      attention_shape(config), attention_weights(config, at, params, nullptr, &a), la.ln1.data(),
      state, d_branch, block_attention_options(), a.precision, scratch, a.d_ln.data(), false, into);
  layer_norm_backward(a.d_ln.data(), x, params + at.ln1_w, la.ln1_mean.data(), la.ln1_rstd.data(),
                      rows, c, a.d_residual.data(), grads + at.ln1_w, at_or_null(grads, at.ln1_b));
}

}  // namespace attn::nn
