// Multi-head attention, reference path: projections, head split, attention, merge, output
// projection, one step per line.
#include "attn/error.hpp"
#include "attn/mha_reference.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/rope.hpp"
#include "src/reference/mha_checks.hpp"

namespace attn {
namespace {

// y + b on every row (b undefined: y itself).
Tensor add_bias(Tensor y, const Tensor& b) {
  if (!b.defined()) return y;
  float* rows = y.data();
  for (int64_t i = 0; i < y.numel(); ++i) rows[i] += b.at({i % b.dim(0)});
  return y;
}

// Y = O·Wo + bo, or O itself when there is no output projection.
Tensor project_output(const Tensor& merged, const Tensor& wo, const Tensor& bo = {}) {
  return wo.defined() ? add_bias(reference::linear(merged, wo), bo) : merged;
}

// Head h of a (B, H, T, n) or (H, T, n) tensor, as a (B, T, n) or (T, n) view.
Tensor head_view(const Tensor& t, int64_t h) {
  return t.rank() == 3 ? t.select(h) : t.transpose(0, 1).select(h);
}

}  // namespace

Tensor split_heads(const Tensor& x, int64_t n_heads) {
  ATTN_CHECK(x.defined() && (x.rank() == 2 || x.rank() == 3),
             "split_heads: x must be (B, T, d_model) or (T, d_model), got ",
             x.defined() ? x.shape_string() : "undefined");
  ATTN_CHECK(n_heads >= 1, "split_heads: n_heads (", n_heads, ") must be >= 1");
  const int64_t d_model = x.dim(-1);
  ATTN_CHECK(d_model % n_heads == 0, "d_model (", d_model, ") must divide by n_heads (", n_heads,
             ")");
  const int64_t d_head = d_model / n_heads;
  // Feature f = h·d_head + e, so head h starts d_head features further along the last dim.
  const int64_t t = x.dim(-2), s_t = x.strides()[x.rank() - 2], s_f = x.strides().back();
  if (x.rank() == 2) return x.as_strided({n_heads, t, d_head}, {d_head * s_f, s_t, s_f});
  return x.as_strided({x.dim(0), n_heads, t, d_head}, {x.strides()[0], d_head * s_f, s_t, s_f});
}

Tensor merge_heads(const Tensor& x) {
  ATTN_CHECK(x.defined() && (x.rank() == 3 || x.rank() == 4),
             "merge_heads: x must be (B, H, T, d_head) or (H, T, d_head), got ",
             x.defined() ? x.shape_string() : "undefined");
  const int64_t d_model = x.dim(-3) * x.dim(-1);
  if (x.rank() == 3) return x.permute({1, 0, 2}).contiguous().reshape({x.dim(1), d_model});
  return x.permute({0, 2, 1, 3}).contiguous().reshape({x.dim(0), x.dim(2), d_model});
}

namespace reference {

MhaResult multi_head_attention(const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options, const MhaExtras& extras) {
  const int64_t n_kv = detail::check_mha(x, wq, wk, wv, wo, n_heads, extras);

  // (B, H, T, d_head) for Q; (B, H_kv, T, d_head) for K and V.
  Tensor q = split_heads(add_bias(reference::linear(x, wq), extras.bq), n_heads);
  Tensor k = split_heads(add_bias(reference::linear(x, wk), extras.bk), n_kv);
  const Tensor v = split_heads(add_bias(reference::linear(x, wv), extras.bv), n_kv);
  if (extras.rope) {
    apply_rope(q, 0, extras.rope_base);
    apply_rope(k, 0, extras.rope_base);
  }
  SdpaResult attention = reference::sdpa(q, k, v, options);  // K/V heads shared by groups
  const Tensor merged = merge_heads(attention.output);       // (B, T, d_model)
  return {project_output(merged, wo, extras.bo), attention.weights};
}

MhaResult multi_head_attention_per_head(const Tensor& x, const std::vector<HeadProjections>& heads,
                                        const Tensor& wo, const SdpaOptions& options) {
  detail::check_mha_input(x);
  ATTN_CHECK(!heads.empty(), "multi_head_attention_per_head: needs at least one head");
  const int64_t d_model = x.dim(-1);
  const int64_t d_head = heads[0].wq.defined() && heads[0].wq.rank() == 2 ? heads[0].wq.dim(1) : 0;
  for (size_t h = 0; h < heads.size(); ++h) {
    for (const Tensor* w : {&heads[h].wq, &heads[h].wk, &heads[h].wv}) {
      ATTN_CHECK(w->defined() && w->rank() == 2 && w->dim(0) == d_model && w->dim(1) == d_head,
                 "multi_head_attention_per_head: head ", h, " projections must be (", d_model, ", ",
                 d_head, "), got ", w->defined() ? w->shape_string() : "undefined");
    }
  }
  const auto n_heads = static_cast<int64_t>(heads.size());
  detail::check_output_projection(wo, n_heads * d_head);

  // Each head attends on its own; its output fills columns [h·d_head, (h+1)·d_head).
  Shape concat_shape = x.shape();
  concat_shape.back() = n_heads * d_head;
  Shape weights_shape = x.shape();
  weights_shape.back() = x.dim(-2);
  weights_shape.insert(weights_shape.end() - 2, n_heads);
  Tensor concatenated(concat_shape), weights(weights_shape);
  for (int64_t h = 0; h < n_heads; ++h) {
    const HeadProjections& head = heads[static_cast<size_t>(h)];
    SdpaResult r = reference::sdpa(reference::linear(x, head.wq), reference::linear(x, head.wk),
                                   reference::linear(x, head.wv), options);
    head_view(split_heads(concatenated, n_heads), h).copy_from(r.output);
    head_view(weights, h).copy_from(r.weights);
  }
  return {project_output(concatenated, wo), weights};
}

}  // namespace reference

}  // namespace attn
