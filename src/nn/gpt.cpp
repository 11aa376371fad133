// Gpt: the parameter layout, initialisation, and the training forward and backward passes
// (llm.c's pattern: each layer a forward/backward pair over preallocated buffers). Decoding
// and sampling are in gpt_decode.cpp, the config's JSON in gpt_config.cpp.
#include "attn/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/random.hpp"
#include "src/core/kept_buffer.hpp"
#include "src/core/memory_limit.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/linalg/gemm_bf16.hpp"
#include "src/linalg/linear.hpp"
#include "src/nn/cross_entropy.hpp"
#include "src/nn/embedding_rows.hpp"
#include "src/nn/gelu.hpp"
#include "src/nn/gpt_internal.hpp"
#include "src/nn/layer_norm.hpp"
#include "src/reference/checks.hpp"

namespace attn {

using nn::Activations;
using nn::at_or_null;

int64_t parameter_count(const GptConfig& config) { return nn::gpt_layout(config).size; }

Gpt::Gpt(const GptConfig& config, uint64_t seed) : Gpt(config, Zeros{}) { draw(seed); }

Gpt Gpt::zeros(const GptConfig& config) { return Gpt(config, Zeros{}); }

Gpt::Gpt(const GptConfig& config, Zeros)
    : config_(config), layout_(std::make_shared<const nn::GptLayout>(nn::gpt_layout(config))) {
  if (config_.n_kv_head == 0) config_.n_kv_head = config_.n_head;
  parameters_ = Tensor({layout_->size});
  if (config_.positions == PositionKind::kSinusoidal) {
    sinusoids_ = sinusoidal_encoding(config_.block_size, config_.n_embd);
  }
}

const std::vector<GptParameter>& Gpt::parameter_table() const { return layout_->table; }

// GPT-2's initialisation; each tensor is drawn from its own seed (the model's seed and its
// index in the table).
void Gpt::draw(uint64_t seed) {
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  for (size_t i = 0; i < layout_->table.size(); ++i) {
    const GptParameter& p = layout_->table[i];
    Tensor view = parameter(p.name);
    switch (p.role) {
      case ParameterRole::kNormGain:
        fill_uniform(view, 0, 1.0f, 1.0f);  // ones
        break;
      case ParameterRole::kEmbedding:
      case ParameterRole::kWeight:
        fill_normal(view, seed * 1000003 + i, 0.0f, 0.02f);
        break;
      case ParameterRole::kResidualProjection:
        fill_normal(view, seed * 1000003 + i, 0.0f, residual_std);
        break;
      case ParameterRole::kNormBias:
      case ParameterRole::kBias:
        break;  // the buffer starts at 0
    }
  }
}

Gpt::Gpt(Gpt&&) noexcept = default;
Gpt& Gpt::operator=(Gpt&&) noexcept = default;
Gpt::~Gpt() = default;

// The named tensor's view into `buffer` (the parameters or their gradients).
Tensor Gpt::named_view(const Tensor& buffer, const std::string& name) const {
  for (const GptParameter& p : layout_->table) {
    if (p.name == name) return buffer.as_strided(p.shape, contiguous_strides(p.shape), p.offset);
  }
  throw Error("Gpt: no parameter named \"" + name + "\"");
}

Tensor& Gpt::parameters() {
  check_float_weights("parameters");
  return parameters_;
}

const Tensor& Gpt::parameters() const {
  check_float_weights("parameters");
  return parameters_;
}

Tensor Gpt::parameter(const std::string& name) const {
  if (bf16_) {  // a matrix's floats are released
    for (const GptParameter& p : layout_->table) {
      if (p.name == name && is_matrix(p)) check_float_weights(name.c_str());
    }
  }
  return named_view(parameters_, name);
}
Tensor& Gpt::gradients() {
  if (!gradients_.defined()) gradients_ = Tensor({parameters_.numel()});
  return gradients_;
}

// The const forms never allocate, so that a const Gpt has no state to race on.
const Tensor& Gpt::gradients() const {
  ATTN_CHECK(gradients_.defined(),
             "Gpt::gradients: the model has none yet; training (zero_grad, forward and "
             "backward) allocates them");
  return gradients_;
}

Tensor Gpt::gradient(const std::string& name) { return named_view(gradients(), name); }

Tensor Gpt::gradient(const std::string& name) const { return named_view(gradients(), name); }

void Gpt::zero_grad() {
  const detail::PhaseScope clock(Phase::kOptimizer);  // the gradients' bookkeeping
  Tensor& gradients = this->gradients();
  float* values = gradients.data();
  // Over the threads: 3.2 MB for the small GPT, a pass the second core would otherwise wait out.
  detail::parallel_ranges(gradients.numel(), 65536, [&](int64_t first, int64_t last) {
    std::fill(values + first, values + last, 0.0f);
  });
}

void Gpt::check_ids(std::span<const int64_t> ids, int64_t batch, const char* what) const {
  ATTN_CHECK(!ids.empty(), "Gpt::", what, ": no token ids; give at least one");
  ATTN_CHECK_ARGUMENT(batch >= 1, "batch", "Gpt::", what, ": batch must be >= 1, got ", batch);
  ATTN_CHECK_ARGUMENT(static_cast<int64_t>(ids.size()) % batch == 0, "batch", "Gpt::", what, ": ",
                      ids.size(), " ids do not split into batch = ", batch, " rows");
  const int64_t t = static_cast<int64_t>(ids.size()) / batch;
  ATTN_CHECK(t <= config_.block_size, "Gpt::", what, ": sequences of ", t,
             " tokens exceed block_size ", config_.block_size);
  for (size_t i = 0; i < ids.size(); ++i) {
    ATTN_CHECK(ids[i] >= 0 && ids[i] < config_.vocab_size, "Gpt::", what, ": token id ", ids[i],
               " at index ", i, " outside [0, ", config_.vocab_size, ")");
  }
}

// x (batch·t, C) = wte[ids] + the positions position … position + t − 1 (learned or sinusoidal).
void Gpt::embed(std::span<const int64_t> ids, int64_t batch, int64_t t, int64_t position,
                float* x) const {
  const detail::PhaseScope clock(Phase::kEmbedding);
  const int64_t c = config_.n_embd;
  const float* table = config_.positions == PositionKind::kLearned
                           ? parameters_.data() + layout_->global.wpe
                       : config_.positions == PositionKind::kSinusoidal ? sinusoids_.data()
                                                                        : nullptr;
  // Rows over the threads (each row its own): a prompt's or a batch's rows, a step's serial
  // pass otherwise; one generated token stays on this thread.
  detail::parallel_ranges(batch * t, 64, [&](int64_t first, int64_t last) {
    if (bf16_) {
      nn::gather_rows(bf16_.get() + layout_->global.wte, ids.data() + first, last - first, c,
                      x + first * c);
    } else {
      nn::gather_rows(parameters_.data() + layout_->global.wte, ids.data() + first, last - first, c,
                      x + first * c);
    }
    if (!table) return;
    for (int64_t row = first; row < last; ++row) {
      const float* position_row = table + (position + row % t) * c;
      float* out = x + row * c;
      for (int64_t e = 0; e < c; ++e) out[e] += position_row[e];
    }
  });
}

// Embeddings, blocks, final LayerNorm and the tied head into a.probs (the logits, for now).
// after_layer, when given, sees each layer's buffers before the next layer reuses them.
void Gpt::forward_logits(std::span<const int64_t> ids, nn::Activations& a,
                         const LayerHook& after_layer) const {
  a.bf16 = bf16_.get();
  embed(ids, a.batch, a.t, 0, a.encoded.data());
  a.dropout.apply(a.encoded.data(), a.rows * config_.n_embd, nn::DropoutSite::kEmbedding, 0);
  const float* params = parameters_.data();
  const float* x = a.encoded.data();
  for (size_t l = 0; l < layout_->blocks.size(); ++l) {
    nn::LayerActivations& la = a.layer(l);
    nn::block_forward(config_, layout_->blocks[l], params, x, la, a, static_cast<int64_t>(l));
    if (after_layer) after_layer(static_cast<int64_t>(l), la);
    x = la.residual3.data();
  }
  const int64_t c = config_.n_embd;
  nn::layer_norm_forward(x, params + layout_->global.lnf_w,
                         at_or_null(params, layout_->global.lnf_b), a.rows, c, a.lnf.data(),
                         a.lnf_mean.data(), a.lnf_rstd.data());
  head_logits(a.lnf.data(), a.rows, a.precision, a.probs.data(), &a);
}

void Gpt::check_ids_and_targets(std::span<const int64_t> ids, std::span<const int64_t> targets,
                                int64_t batch, const char* what) const {
  check_ids(ids, batch, what);
  ATTN_CHECK(targets.size() == ids.size(), "Gpt::", what, ": ", targets.size(), " targets for ",
             ids.size(), " ids");
}

// The mean over a's rows of −log p(target), from the logits forward_logits left in a.probs
// (which become the probabilities).
float Gpt::mean_cross_entropy(Activations& a, const int64_t* targets) const {
  const double total =
      nn::cross_entropy_forward(a.probs.data(), targets, a.rows, config_.vocab_size);
  return static_cast<float>(total / static_cast<double>(a.rows));
}

float Gpt::forward(std::span<const int64_t> ids, std::span<const int64_t> targets, int64_t batch,
                   uint64_t dropout_seed, int64_t first_window) {
  ATTN_CHECK(first_window >= 0, "Gpt::forward: first_window must be >= 0, got ", first_window);
  check_float_weights("forward");
  check_ids_and_targets(ids, targets, batch, "forward");
  const int64_t t = static_cast<int64_t>(ids.size()) / batch;
  if (!acts_ || acts_->batch != batch || acts_->t != t) {
    acts_ = std::make_unique<Activations>(config_, batch, t, nn::ActivationUse::kTraining);
  }
  Activations& a = *acts_;
  a.has_forward = false;  // until the loss is known: a failed forward leaves nothing to backward
  a.targets.assign(targets.begin(), targets.end());
  a.ids.assign(ids.begin(), ids.end());
  a.dropout.seed(config_.dropout, dropout_seed, first_window * t * config_.n_embd);
  a.precision = training_precision_;
  // bf16 products: the weights rounded once for the step, each product's input once for the
  // forward and the backward (Activations::keep_rounded_operands).
  if (a.precision == Dtype::kBFloat16 && nn::rounded_operands_kept()) {
    a.keep_rounded_operands(config_, parameters_.data(), parameters_.numel());
  } else {
    a.drop_rounded_operands();
  }
  forward_logits(ids, a);
  const float loss = mean_cross_entropy(a, a.targets.data());
  a.has_forward = true;
  return loss;
}

// Inference owns its buffers: each call allocates one layer's worth (nn::ActivationUse), so
// any number of threads may run one model at once, and a pending backward() is never touched.
// Dropout is off (the buffers' default) and the products run in float.
float Gpt::loss(std::span<const int64_t> ids, std::span<const int64_t> targets,
                int64_t batch) const {
  check_ids_and_targets(ids, targets, batch, "loss");
  Activations a(config_, batch, static_cast<int64_t>(ids.size()) / batch,
                nn::ActivationUse::kInference);
  forward_logits(ids, a);
  return mean_cross_entropy(a, targets.data());
}

Tensor Gpt::logits(std::span<const int64_t> ids, int64_t batch) const {
  check_ids(ids, batch, "logits");
  const int64_t t = static_cast<int64_t>(ids.size()) / batch;
  detail::check_fits_in_memory({batch, t, config_.vocab_size}, "Gpt::logits: the logits");
  Activations a(config_, batch, t, nn::ActivationUse::kInference);
  forward_logits(ids, a);
  return a.probs.reshape({batch, t, config_.vocab_size});  // the call's own buffer: no copy
}

Tensor Gpt::attention_weights(std::span<const int64_t> ids) const {
  check_ids(ids, 1, "attention_weights");
  const int64_t t = static_cast<int64_t>(ids.size());
  detail::check_fits_in_memory({config_.n_layer, config_.n_head, t, t},
                               "Gpt::attention_weights: the weights");
  Activations a(config_, 1, t, nn::ActivationUse::kInference);
  Tensor weights({config_.n_layer, config_.n_head, t, t});
  forward_logits(ids, a, [&](int64_t l, const nn::LayerActivations& la) {
    const Tensor layer = detail::attention_layer_weights(nn::attention_shape(config_), la.qkv,
                                                         nn::block_attention_options());
    weights.select(l).copy_from(layer.select(0));
  });
  return weights;
}

namespace {

// The tied head's products in a bf16 training step: d_lnf = dlogits·wte and d_wte += dlogitsᵀ·lnf
// on dlogits rounded once for both, and the step's rounded wte and lnf.
void head_backward_rounded(nn::Activations& a, int64_t wte, int64_t c, int64_t v, float* d_wte) {
  const detail::PhaseScope clock(Phase::kMatmul);
  const detail::KeptBuffer dlogits_bits(static_cast<size_t>(a.rows * v) * sizeof(uint16_t));
  detail::round_rows_to_bfloat16(a.probs.data(), a.rows, v, v, dlogits_bits.as<uint16_t>());
  const auto dlogits = detail::MatrixOperand::of(dlogits_bits.as<uint16_t>(), v);
  detail::gemm_bf16(false, false, a.rows, c, v, 1.0f, dlogits,
                    detail::MatrixOperand::of(a.rounded_at(wte), c), 0.0f, a.d_ln.data(), c);
  detail::gemm_bf16(true, false, v, c, a.rows, 1.0f, dlogits,
                    detail::MatrixOperand::of(a.lnf_bits.data(), c), 1.0f, d_wte, c);
}

}  // namespace

void Gpt::backward(float loss_scale, const std::function<void(int64_t)>& final_from) {
  ATTN_CHECK(acts_ && acts_->has_forward, "Gpt::backward: call forward(ids, targets) first");
  Activations& a = *acts_;
  a.has_forward = false;  // the probabilities become dlogits below
  const int64_t c = config_.n_embd, v = config_.vocab_size;
  const float* params = parameters_.data();
  float* grads = gradients().data();
  nn::cross_entropy_backward(a.probs.data(), a.targets.data(), a.rows, v,
                             loss_scale / static_cast<float>(a.rows));
  // Tied head: logits = lnf·wteᵀ, so d_lnf = dlogits·wte and d_wte += dlogitsᵀ·lnf.
  const float* dlogits = a.probs.data();
  if (a.precision == Dtype::kBFloat16 && !a.lnf_bits.empty()) {
    head_backward_rounded(a, layout_->global.wte, c, v, grads + layout_->global.wte);
  } else {
    gemm(false, false, a.rows, c, v, 1.0f, dlogits, v, params + layout_->global.wte, c, 0.0f,
         a.d_ln.data(), c, a.precision);
    gemm(true, false, v, c, a.rows, 1.0f, dlogits, v, a.lnf.data(), c, 1.0f,
         grads + layout_->global.wte, c, a.precision);
  }
  const float* x_final =
      layout_->blocks.empty() ? a.encoded.data() : a.layers.back().residual3.data();
  float* d_residual = a.d_residual.data();
  detail::parallel_ranges(a.rows * c, 16384, [&](int64_t first, int64_t last) {
    std::fill(d_residual + first, d_residual + last, 0.0f);
  });
  nn::layer_norm_backward(a.d_ln.data(), x_final, params + layout_->global.lnf_w, a.lnf_mean.data(),
                          a.lnf_rstd.data(), a.rows, c, a.d_residual.data(),
                          grads + layout_->global.lnf_w, at_or_null(grads, layout_->global.lnf_b));
  // The buffer's order is wte, wpe, the blocks, ln_f: what is final grows from the end.
  if (final_from) final_from(layout_->global.lnf_w);
  for (int64_t l = static_cast<int64_t>(layout_->blocks.size()) - 1; l >= 0; --l) {
    const float* x =
        l == 0 ? a.encoded.data() : a.layers[static_cast<size_t>(l) - 1].residual3.data();
    nn::block_backward(config_, layout_->blocks[static_cast<size_t>(l)], params, grads, x,
                       a.layers[static_cast<size_t>(l)], a, l);
    if (final_from) final_from(layout_->blocks[static_cast<size_t>(l)].ln1_w);
  }
  // Embeddings: the dropout mask, then the rows back to the tables, in row order.
  const detail::PhaseScope clock(Phase::kEmbedding);
  float* d_x = a.d_residual.data();
  a.dropout.apply(d_x, a.rows * c, nn::DropoutSite::kEmbedding, 0);
  // Columns over the threads: every table row still sums its rows in row order (a repeated id
  // or position in a fixed order), whatever the thread count.
  float* d_wte = grads + layout_->global.wte;
  float* d_wpe =
      config_.positions == PositionKind::kLearned ? grads + layout_->global.wpe : nullptr;
  detail::parallel_ranges(c, 32, [&](int64_t e0, int64_t e1) {
    for (int64_t r = 0; r < a.rows; ++r) {
      const float* from = d_x + r * c;
      float* token_row = d_wte + a.ids[static_cast<size_t>(r)] * c;
      for (int64_t e = e0; e < e1; ++e) token_row[e] += from[e];
      if (d_wpe == nullptr) continue;
      float* position_row = d_wpe + (r % a.t) * c;
      for (int64_t e = e0; e < e1; ++e) position_row[e] += from[e];
    }
  });
  if (final_from) final_from(0);
}

}  // namespace attn
