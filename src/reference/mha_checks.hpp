// The argument checks both multi-head attention paths share. Internal to the library.
#pragma once

#include <utility>

#include "attn/error.hpp"
#include "attn/mha_reference.hpp"
#include "attn/tensor.hpp"
#include "src/reference/finite.hpp"

namespace attn::detail {

inline void check_mha_input(const Tensor& x) {
  ATTN_CHECK(x.defined() && (x.rank() == 2 || x.rank() == 3),
             "multi_head_attention: x must be (B, T, d_model) or (T, d_model), got ",
             x.defined() ? x.shape_string() : "undefined");
}

inline void check_square(const Tensor& w, const char* name, int64_t d_model) {
  ATTN_CHECK(w.defined() && w.rank() == 2 && w.dim(0) == d_model && w.dim(1) == d_model,
             "multi_head_attention: ", name, " must be (d_model, d_model) = (", d_model, ", ",
             d_model, "), got ", w.defined() ? w.shape_string() : "undefined");
}

inline void check_output_projection(const Tensor& wo, int64_t d_in) {
  if (!wo.defined()) return;
  ATTN_CHECK(wo.rank() == 2 && wo.dim(0) == d_in, "multi_head_attention: wo must be (", d_in,
             ", d_out), got ", wo.shape_string());
}

inline void check_bias(const Tensor& b, const char* name, int64_t width) {
  if (!b.defined()) return;
  ATTN_CHECK(b.rank() == 1 && b.dim(0) == width, "multi_head_attention: ", name, " must be (",
             width, "), got ", b.shape_string());
}

// x (B, T, d_model) or (T, d_model); wq (d_model, d_model); wk, wv (d_model, n_kv·d_head);
// wo (d_model, d_out) or undefined; the extras' biases and rope against them. Returns the K/V
// head count (extras.n_kv_heads, or n_heads when 0).
inline int64_t check_mha(const Tensor& x, const Tensor& wq, const Tensor& wk, const Tensor& wv,
                         const Tensor& wo, int64_t n_heads, const MhaExtras& extras) {
  check_mha_input(x);
  const int64_t d_model = x.dim(-1);
  ATTN_CHECK(n_heads >= 1, "split_heads: n_heads (", n_heads, ") must be >= 1");
  ATTN_CHECK(d_model % n_heads == 0, "d_model (", d_model, ") must divide by n_heads (", n_heads,
             ")");
  const int64_t d_head = d_model / n_heads;
  const int64_t n_kv = extras.n_kv_heads == 0 ? n_heads : extras.n_kv_heads;
  ATTN_CHECK(n_kv >= 1 && n_heads % n_kv == 0, "multi_head_attention: n_kv_heads (", n_kv,
             ") must divide n_heads (", n_heads, ")");
  check_square(wq, "wq", d_model);
  for (const auto& [w, name] : {std::pair{&wk, "wk"}, std::pair{&wv, "wv"}}) {
    ATTN_CHECK(w->defined() && w->rank() == 2 && w->dim(0) == d_model && w->dim(1) == n_kv * d_head,
               "multi_head_attention: ", name, " must be (d_model, n_kv_heads·d_head) = (", d_model,
               ", ", n_kv * d_head, "), got ", w->defined() ? w->shape_string() : "undefined");
  }
  check_output_projection(wo, d_model);
  check_bias(extras.bq, "bq", d_model);
  check_bias(extras.bk, "bk", n_kv * d_head);
  check_bias(extras.bv, "bv", n_kv * d_head);
  ATTN_CHECK(!extras.bo.defined() || wo.defined(), "multi_head_attention: bo needs wo");
  if (wo.defined()) check_bias(extras.bo, "bo", wo.dim(1));
  ATTN_CHECK(!extras.rope || d_head % 2 == 0,
             "multi_head_attention: rope needs an even d_head, got ", d_head);
  for (const auto& [t, name] :
       {std::pair{&x, "x"}, std::pair{&wq, "wq"}, std::pair{&wk, "wk"}, std::pair{&wv, "wv"},
        std::pair{&wo, "wo"}, std::pair{&extras.bq, "bq"}, std::pair{&extras.bk, "bk"},
        std::pair{&extras.bv, "bv"}, std::pair{&extras.bo, "bo"}}) {
    check_finite(*t, "multi_head_attention", name);
  }
  return n_kv;
}

}  // namespace attn::detail
