// See layer.hpp. The heads are strided views of the QKV buffer (no transpose copy); the fused
// kernel writes A straight into (B, T, H, d_head) order, so merging the heads costs nothing and
// A·Wo is one product over contiguous rows.
#include "src/attention/layer.hpp"

#include "attn/error.hpp"
#include "attn/rope.hpp"
#include "src/attention/fused.hpp"
#include "src/linalg/linear.hpp"

namespace attn::detail {
namespace {

// Q's, K's and V's first column in the QKV buffer, and their widths.
struct QkvColumns {
  int64_t first, count;
};

QkvColumns columns_of(const AttentionLayerShape& s, QkvPart part) {
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  switch (part) {
    case QkvPart::kQuery:
      return {0, q};
    case QkvPart::kKey:
      return {q, kv};
    case QkvPart::kValue:
      break;
  }
  return {q + kv, kv};
}

// True when wq, wk, wv (and the biases) are the column blocks of one [Wq | Wk | Wv].
bool is_one_matrix(const AttentionLayerShape& s, const AttentionLayerWeights& w) {
  const int64_t width = s.qkv_width(), k = columns_of(s, QkvPart::kKey).first,
                v = columns_of(s, QkvPart::kValue).first;
  const bool packed_weights =
      w.ld_q == width && w.ld_k == width && w.ld_v == width && w.wk == w.wq + k && w.wv == w.wq + v;
  const bool packed_biases =
      (!w.bq && !w.bk && !w.bv) || (w.bq && w.bk == w.bq + k && w.bv == w.bq + v);
  return packed_weights && packed_biases;
}

// qkv (rows, width) = x·[Wq | Wk | Wv] + bqkv: one product for one matrix, else one per part
// into its columns (no concatenated copy of the weights).
// x_rounded: room for x's bits (bf16 products, one matrix), or null.
void project_qkv(const AttentionLayerShape& s, const AttentionLayerWeights& w, const float* x,
                 int64_t rows, Dtype precision, float* qkv, uint16_t* x_rounded) {
  const int64_t width = s.qkv_width();
  if (is_one_matrix(s, w)) {
    linear_forward(x, w.wq, w.wqkv_bf16, w.bq, rows, s.d_model, width, qkv, precision,
                   {w.wqkv_rounded, x_rounded});
    return;
  }
  ATTN_CHECK(!w.wqkv_bf16 && !w.wqkv_rounded,
             "attention layer: bf16 weights need the packed [Wq | Wk | Wv] form");
  const float* weights[] = {w.wq, w.wk, w.wv};
  const float* biases[] = {w.bq, w.bk, w.bv};
  const int64_t strides[] = {w.ld_q, w.ld_k, w.ld_v};
  for (QkvPart part : {QkvPart::kQuery, QkvPart::kKey, QkvPart::kValue}) {
    const QkvColumns c = columns_of(s, part);
    const auto i = static_cast<size_t>(part);
    if (biases[i]) {
      gemm_bias(false, false, rows, c.count, s.d_model, x, s.d_model, weights[i], strides[i],
                biases[i], qkv + c.first, width, precision);
    } else {
      gemm(false, false, rows, c.count, s.d_model, 1.0f, x, s.d_model, weights[i], strides[i], 0.0f,
           qkv + c.first, width, precision);
    }
  }
}

struct HeadViews {
  Tensor q, k, v;
};

HeadViews heads_of(const AttentionLayerShape& s, const Tensor& qkv) {
  return {qkv_heads(s, qkv, QkvPart::kQuery), qkv_heads(s, qkv, QkvPart::kKey),
          qkv_heads(s, qkv, QkvPart::kValue)};
}

// The projections of x (B·T rows) into qkv, the heads viewed, Q and K rotated for positions
// position_offset … .
HeadViews project_heads(const AttentionLayerShape& s, const AttentionLayerWeights& w,
                        const float* x, int64_t position_offset, Dtype precision, Tensor qkv,
                        uint16_t* x_rounded = nullptr) {
  project_qkv(s, w, x, qkv.dim(0) * qkv.dim(1), precision, qkv.data(), x_rounded);
  HeadViews h = heads_of(s, qkv);
  if (s.rope) {
    apply_rope(h.q, position_offset, s.rope_base);
    apply_rope(h.k, position_offset, s.rope_base);
  }
  return h;
}

}  // namespace

AttentionLayerWeights AttentionLayerWeights::packed(const AttentionLayerShape& s, const float* wqkv,
                                                    const float* bqkv, const float* wo,
                                                    const float* bo) {
  AttentionLayerWeights w;
  const int64_t k = columns_of(s, QkvPart::kKey).first, v = columns_of(s, QkvPart::kValue).first;
  w.wq = wqkv;
  w.wk = wqkv + k;
  w.wv = wqkv + v;
  w.ld_q = w.ld_k = w.ld_v = s.qkv_width();
  if (bqkv) {
    w.bq = bqkv;
    w.bk = bqkv + k;
    w.bv = bqkv + v;
  }
  w.wo = wo;
  w.bo = bo;
  return w;
}

Tensor qkv_heads(const AttentionLayerShape& s, const Tensor& qkv, QkvPart part) {
  const int64_t b = qkv.dim(0), t = qkv.dim(1), width = qkv.dim(2);
  const QkvColumns c = columns_of(s, part);
  return qkv.as_strided({b, c.count / s.head_dim, t, s.head_dim}, {t * width, s.head_dim, width, 1},
                        c.first);
}

namespace {

// The layer's precision applies to attention's products too: bf16 rounds Q, K, V, P and dS for
// them (SdpaOptions::precision), as it rounds the projections' operands.
SdpaOptions with_products_in(const SdpaOptions& options, Dtype precision) {
  SdpaOptions attention = options;
  attention.precision = precision;
  return attention;
}

}  // namespace

void attention_layer_forward(const AttentionLayerShape& s, const AttentionLayerWeights& w,
                             const float* x, const SdpaOptions& options, Dtype precision,
                             AttentionLayerState& state, float* y) {
  const HeadViews h = project_heads(s, w, x, 0, precision, state.qkv, state.x_rounded);
  const SdpaOptions attention = with_products_in(options, precision);
  sdpa_into(check_attention(h.q, h.k, h.v, attention), h.q, h.k, h.v, attention,
            state.attended.permute({0, 2, 1, 3}), state.logsumexp);
  if (w.wo) {
    const int64_t rows = state.qkv.dim(0) * state.qkv.dim(1);
    linear_forward(state.attended.data(), w.wo, w.wo_bf16, w.bo, rows, s.merged_width(), s.d_out, y,
                   precision, {w.wo_rounded, state.attended_rounded});
  }
}

Tensor attention_layer_weights(const AttentionLayerShape& s, const Tensor& qkv,
                               const SdpaOptions& options) {
  const HeadViews h = heads_of(s, qkv);
  return reference::sdpa(h.q, h.k, h.v, options).weights;
}

void attention_layer_backward(const AttentionLayerShape& s, const AttentionLayerWeights& w,
                              const float* x, const AttentionLayerState& state, const float* d_y,
                              const SdpaOptions& options, Dtype precision,
                              AttentionLayerScratch& scratch, float* d_x, bool accumulate_dx,
                              const AttentionLayerGradients& grads) {
  ATTN_CHECK(is_one_matrix(s, w) && w.wo,
             "attention layer backward: needs [Wq | Wk | Wv] as one "
             "matrix and an output projection");
  ATTN_CHECK(!w.wqkv_bf16 && !w.wo_bf16,
             "attention layer backward: needs float weights, not the bf16 copies");
  const int64_t rows = state.qkv.dim(0) * state.qkv.dim(1);
  // Y = A·Wo + bo.
  linear_backward(d_y, state.attended.data(), w.wo, rows, s.merged_width(), s.d_out,
                  scratch.d_attended.data(), false, grads.wo, grads.bo, precision,
                  {w.wo_rounded, state.attended_rounded});
  // A = sdpa(Q, K, V): the gradients land in the columns of dQKV the forward read Q, K, V from.
  const HeadViews h = heads_of(s, state.qkv);
  HeadViews d = heads_of(s, scratch.d_qkv);
  const SdpaOptions attention = with_products_in(options, precision);
  sdpa_backward_into(check_attention(h.q, h.k, h.v, attention), h.q, h.k, h.v,
                     state.attended.permute({0, 2, 1, 3}), state.logsumexp,
                     scratch.d_attended.permute({0, 2, 1, 3}), attention, d.q, d.k, d.v);
  // Q, K rotated: rotate their gradients back.
  if (s.rope) {
    apply_rope_inverse(d.q, 0, s.rope_base);
    apply_rope_inverse(d.k, 0, s.rope_base);
  }
  // QKV = X·Wqkv + bqkv.
  linear_backward(scratch.d_qkv.data(), x, w.wq, rows, s.d_model, s.qkv_width(), d_x, accumulate_dx,
                  grads.wqkv, grads.bqkv, precision, {w.wqkv_rounded, state.x_rounded});
}

void attention_layer_decode(const AttentionLayerShape& s, const AttentionLayerWeights& w,
                            const Tensor& x, KVCache& cache, const SdpaOptions& options,
                            Dtype precision, float* y, bool last_query_only) {
  const KVCacheConfig& c = cache.config();
  ATTN_CHECK(c.n_kv_heads == s.kv_heads && c.head_dim == s.head_dim, "attention: the cache holds ",
             c.n_kv_heads, " heads of ", c.head_dim, ", this layer needs ", s.kv_heads, " of ",
             s.head_dim);
  ATTN_CHECK(w.wo, "attention layer decode: needs an output projection");
  const int64_t b = x.dim(0), t = x.dim(1);
  const Tensor x_rows = x.contiguous();
  const Tensor qkv = Tensor::uninitialized({b, t, s.qkv_width()});  // the projection writes it
  const HeadViews h = project_heads(s, w, x_rows.data(), cache.position(), precision, qkv);
  cache.append(h.k, h.v);
  // The queries that attend: all T, or the last (query i sits at position − T + i, so the
  // last alone is still at its own position).
  const int64_t tq = last_query_only ? 1 : t;
  const Tensor q = last_query_only ? h.q.as_strided({b, s.heads, 1, s.head_dim}, h.q.strides(),
                                                    (t - 1) * h.q.strides()[2])
                                   : h.q;
  const Tensor attended = attend_cached(q, cache, options).output;    // (B, H, tq, d_head)
  const Tensor merged = attended.permute({0, 2, 1, 3}).contiguous();  // (B, tq, H, d_head)
  linear_forward(merged.data(), w.wo, w.wo_bf16, w.bo, b * tq, s.merged_width(), s.d_out, y,
                 precision);
}

KVCache make_layer_cache(const AttentionLayerShape& s, int64_t batch, int64_t capacity, Dtype dtype,
                         int64_t window) {
  KVCacheConfig c;
  c.batch = batch;
  c.n_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.capacity = capacity;
  c.window = window;
  c.dtype = dtype;
  return KVCache(c);
}

}  // namespace attn::detail
