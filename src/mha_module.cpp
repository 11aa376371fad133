// MultiHeadAttention: the layer object around the fast path — one GEMM for Q, K and V, heads
// as strided views, RoPE in place, the fused kernel (whole sequence) or the cached decode
// (new tokens), one GEMM for the output.
#include <cmath>

#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "src/sdpa_common.hpp"

namespace attn {

MultiHeadAttention::MultiHeadAttention(const MhaConfig& config) : config_(config) {
  if (config_.n_kv_heads == 0) config_.n_kv_heads = config_.n_heads;
  const int64_t d = config_.d_model, h = config_.n_heads, h_kv = config_.n_kv_heads;
  ATTN_CHECK(d >= 1 && h >= 1 && h_kv >= 1, "MultiHeadAttention: d_model (", d, "), n_heads (",
             h, ") and n_kv_heads (", h_kv, ") must be >= 1");
  ATTN_CHECK(d % h == 0, "d_model (", d, ") must divide by n_heads (", h, ")");
  ATTN_CHECK(h % h_kv == 0, "MultiHeadAttention: n_kv_heads (", h_kv, ") must divide n_heads (",
             h, ")");
  ATTN_CHECK(!config_.rope || head_dim() % 2 == 0, "MultiHeadAttention: rope needs an even head_dim, got ",
             head_dim());
  const int64_t width = (h + 2 * h_kv) * head_dim();
  const float stddev = 1.0f / std::sqrt(static_cast<float>(d));
  wqkv = rand_normal({d, width}, config_.seed, 0.0f, stddev);
  wo = rand_normal({h * head_dim(), d}, config_.seed + 1, 0.0f, stddev);
  if (config_.bias) {
    bqkv = Tensor({width});
    bo = Tensor({d});
  }
}

Tensor MultiHeadAttention::qkv_heads(const Tensor& qkv, QkvPart part) const {
  const int64_t b = qkv.dim(0), t = qkv.dim(1), width = qkv.dim(2), dh = head_dim();
  const int64_t h = config_.n_heads, h_kv = config_.n_kv_heads;
  const int64_t count = part == QkvPart::kQuery ? h : h_kv;
  const int64_t column = part == QkvPart::kQuery ? 0 : part == QkvPart::kKey ? h * dh : (h + h_kv) * dh;
  return qkv.as_strided({b, count, t, dh}, {t * width, dh, width, 1}, column);
}

MultiHeadAttention::Projected MultiHeadAttention::project(const Tensor& x,
                                                          int64_t position_offset) const {
  ATTN_CHECK(x.defined() && x.rank() == 3 && x.dim(2) == config_.d_model,
             "MultiHeadAttention: x must be (B, T, d_model = ", config_.d_model, "), got ",
             x.defined() ? x.shape_string() : "undefined");
  const int64_t b = x.dim(0), t = x.dim(1), width = wqkv.dim(1);
  Projected p;
  p.qkv = linear(x, wqkv);  // (B, T, width)
  if (bqkv.defined()) {
    float* row = p.qkv.data();
    for (int64_t r = 0; r < b * t; ++r, row += width) {
      for (int64_t c = 0; c < width; ++c) row[c] += bqkv.at({c});
    }
  }
  p.q = qkv_heads(p.qkv, QkvPart::kQuery);
  p.k = qkv_heads(p.qkv, QkvPart::kKey);
  p.v = qkv_heads(p.qkv, QkvPart::kValue);
  if (config_.rope) {
    apply_rope(p.q, position_offset, config_.rope_base);
    apply_rope(p.k, position_offset, config_.rope_base);
  }
  return p;
}

Tensor MultiHeadAttention::output_projection(const Tensor& attended) const {
  const Tensor merged = attended.reshape({attended.dim(0), attended.dim(1), -1});
  Tensor y = linear(merged, wo);
  if (bo.defined()) {
    float* row = y.data();
    for (int64_t r = 0; r < y.numel() / config_.d_model; ++r, row += config_.d_model) {
      for (int64_t c = 0; c < config_.d_model; ++c) row[c] += bo.at({c});
    }
  }
  return y;
}

Tensor MultiHeadAttention::forward(const Tensor& x, const SdpaOptions& options) const {
  MhaActivations saved;
  return forward(x, options, saved);
}

Tensor MultiHeadAttention::forward(const Tensor& x, const SdpaOptions& options,
                                   MhaActivations& saved) const {
  const Projected p = project(x, 0);
  saved.x = x;
  saved.qkv = p.qkv;
  saved.attended = Tensor({x.dim(0), x.dim(1), config_.n_heads, head_dim()});  // (B, T, H, d_head)
  saved.logsumexp = Tensor({x.dim(0), config_.n_heads, x.dim(1)});
  saved.options = options;
  detail::sdpa_into(detail::check_attention(p.q, p.k, p.v, options), p.q, p.k, p.v, options,
                    saved.attended.permute({0, 2, 1, 3}), saved.logsumexp.data());
  return output_projection(saved.attended);
}

Tensor MultiHeadAttention::forward(const Tensor& x, KVCache& cache,
                                   const SdpaOptions& options) const {
  const KVCacheConfig& c = cache.config();
  ATTN_CHECK(c.kv_heads == config_.n_kv_heads && c.head_dim == head_dim(),
             "MultiHeadAttention: the cache holds ", c.kv_heads, " heads of ", c.head_dim,
             ", this layer needs ", config_.n_kv_heads, " of ", head_dim());
  const Projected p = project(x, cache.position());
  cache.append(p.k, p.v);
  const Tensor attended = attend_cached(p.q, cache, options).output;  // (B, H, T, d_head)
  return output_projection(attended.permute({0, 2, 1, 3}).contiguous());
}

KVCache MultiHeadAttention::make_cache(int64_t batch, int64_t capacity, CacheDtype dtype,
                                       int64_t window) const {
  KVCacheConfig c;
  c.batch = batch;
  c.kv_heads = config_.n_kv_heads;
  c.head_dim = head_dim();
  c.capacity = capacity;
  c.window = window;
  c.dtype = dtype;
  return KVCache(c);
}

}  // namespace attn
