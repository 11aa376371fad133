// The argument checks both multi-head attention paths share. Internal to the library.
#pragma once

#include "attn/error.hpp"
#include "attn/tensor.hpp"

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

// x (B, T, d_model) or (T, d_model); wq, wk, wv (d_model, d_model); wo (d_model, d_out) or
// undefined.
inline void check_mha(const Tensor& x, const Tensor& wq, const Tensor& wk, const Tensor& wv,
                      const Tensor& wo) {
  check_mha_input(x);
  const int64_t d_model = x.dim(-1);
  check_square(wq, "wq", d_model);
  check_square(wk, "wk", d_model);
  check_square(wv, "wv", d_model);
  check_output_projection(wo, d_model);
}

}  // namespace attn::detail
