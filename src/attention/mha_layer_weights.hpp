// MultiHeadAttention's weights as the layer core takes them: what mha_layer.cpp and
// mha_layer_backward.cpp share. Internal to the library.
#pragma once

#include "attn/error.hpp"
#include "attn/mha.hpp"
#include "src/attention/layer.hpp"
#include "src/reference/finite.hpp"

namespace attn::detail {

inline AttentionLayerShape layer_shape(const MhaConfig& c) {
  const int64_t head_dim = c.d_model / c.n_heads;
  return {c.d_model, c.n_heads, c.n_kv_heads, head_dim, c.d_model, c.rope, c.rope_base};
}

// Contiguous handles of the layer's tensors (the members may be views) and their pointers.
struct LayerWeights {
  explicit LayerWeights(const MultiHeadAttention& m)
      : wqkv(m.wqkv.defined() ? m.wqkv.contiguous() : Tensor{}),
        wo(m.wo.defined() ? m.wo.contiguous() : Tensor{}),
        bqkv(m.bqkv.defined() ? m.bqkv.contiguous() : Tensor{}),
        bo(m.bo.defined() ? m.bo.contiguous() : Tensor{}) {
    const AttentionLayerShape s = layer_shape(m.config());
    check_shape(wqkv, {s.d_model, s.qkv_width()}, "wqkv");
    check_shape(wo, {s.merged_width(), s.d_out}, "wo");
    if (bqkv.defined()) check_shape(bqkv, {s.qkv_width()}, "bqkv");
    if (bo.defined()) check_shape(bo, {s.d_out}, "bo");
    view = AttentionLayerWeights::packed(s, wqkv.data(), bqkv.defined() ? bqkv.data() : nullptr,
                                         wo.data(), bo.defined() ? bo.data() : nullptr);
  }
  Tensor wqkv, wo, bqkv, bo;
  AttentionLayerWeights view;

 private:
  static void check_shape(const Tensor& t, const Shape& expected, const char* name) {
    ATTN_CHECK(t.defined() && t.shape() == expected, "MultiHeadAttention: ", name, " must be ",
               to_string(expected), ", got ", t.defined() ? t.shape_string() : "undefined");
  }
};

inline void check_input(const MhaConfig& c, const Tensor& x) {
  ATTN_CHECK(x.defined() && x.rank() == 3 && x.dim(2) == c.d_model,
             "MultiHeadAttention: x must be (B, T, d_model = ", c.d_model, "), got ",
             x.defined() ? x.shape_string() : "undefined");
  check_finite(x, "MultiHeadAttention", "x");
}

}  // namespace attn::detail
