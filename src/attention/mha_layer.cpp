// MultiHeadAttention: the layer object that owns its weights; forward, decode and backward
// (mha_layer_backward.cpp) all run the one layer core (src/attention/layer.hpp).
#include <cmath>

#include "attn/error.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "src/attention/layer.hpp"
#include "src/attention/mha_layer_weights.hpp"
#include "src/core/checked_size.hpp"

namespace attn {

MultiHeadAttention::MultiHeadAttention(const MhaConfig& config) : config_(config) {
  if (config_.n_kv_heads == 0) config_.n_kv_heads = config_.n_heads;
  const int64_t d = config_.d_model, h = config_.n_heads, h_kv = config_.n_kv_heads;
  ATTN_CHECK(d >= 1 && h >= 1 && h_kv >= 1, "MultiHeadAttention: d_model (", d, "), n_heads (", h,
             ") and n_kv_heads (", h_kv, ") must be >= 1");
  check_float_dtype(config_.precision, "MultiHeadAttention: precision");
  ATTN_CHECK(d % h == 0, "d_model (", d, ") must divide by n_heads (", h, ")");
  ATTN_CHECK(h % h_kv == 0, "MultiHeadAttention: n_kv_heads (", h_kv, ") must divide n_heads (", h,
             ")");
  ATTN_CHECK(!config_.rope || head_dim() % 2 == 0,
             "MultiHeadAttention: rope needs an even head_dim, got ", head_dim());
  // Both weight matrices are d_model × about d_model: d_model beyond 2^20 (4 TiB of floats)
  // is refused here, before (h + 2·h_kv)·head_dim or the shapes can wrap.
  detail::checked_size({d, d}, int64_t{1} << 40, "MultiHeadAttention: d_model²");
  const int64_t width = (h + 2 * h_kv) * head_dim();
  const float stddev = 1.0f / std::sqrt(static_cast<float>(d));
  wqkv = rand_normal({d, width}, config_.seed, 0.0f, stddev);
  wo = rand_normal({h * head_dim(), d}, config_.seed + 1, 0.0f, stddev);
  if (config_.bias) {
    bqkv = Tensor({width});
    bo = Tensor({d});
  }
}

Tensor MultiHeadAttention::forward(const Tensor& x, const SdpaOptions& options) const {
  MhaActivations saved;
  return forward(x, options, saved);
}

Tensor MultiHeadAttention::forward(const Tensor& x, const SdpaOptions& options,
                                   MhaActivations& saved) const {
  detail::check_input(config_, x);
  const int64_t b = x.dim(0), t = x.dim(1);
  const detail::AttentionLayerShape shape = detail::layer_shape(config_);
  const detail::LayerWeights w(*this);
  saved.x = x.contiguous();
  saved.qkv = Tensor({b, t, shape.qkv_width()});
  saved.attended = Tensor({b, t, config_.n_heads, head_dim()});
  saved.logsumexp = Tensor({b, config_.n_heads, t});
  saved.options = options;
  detail::AttentionLayerState state{saved.qkv, saved.attended, saved.logsumexp.data()};
  Tensor y({b, t, config_.d_model});
  detail::attention_layer_forward(shape, w.view, saved.x.data(), options, config_.precision, state,
                                  y.data());
  return y;
}

Tensor MultiHeadAttention::attention_weights(const Tensor& x, const SdpaOptions& options) const {
  MhaActivations saved;
  forward(x, options, saved);
  return detail::attention_layer_weights(detail::layer_shape(config_), saved.qkv, options);
}

Tensor MultiHeadAttention::forward(const Tensor& x, KVCache& cache,
                                   const SdpaOptions& options) const {
  detail::check_input(config_, x);
  const detail::LayerWeights w(*this);
  Tensor y({x.dim(0), x.dim(1), config_.d_model});
  detail::attention_layer_decode(detail::layer_shape(config_), w.view, x, cache, options,
                                 config_.precision, y.data());
  return y;
}

KVCache MultiHeadAttention::make_cache(int64_t batch, int64_t capacity, Dtype dtype,
                                       int64_t window) const {
  return detail::make_layer_cache(detail::layer_shape(config_), batch, capacity, dtype, window);
}

}  // namespace attn
