// MultiHeadAttention::backward: the layer core's backward (src/attention/layer.hpp) into fresh
// gradient tensors — the forward's steps in reverse, each through the same fast paths (oneDNN
// products for the projections, the fused attention backward for the heads, RoPE rotated
// back).
#include "attn/error.hpp"
#include "attn/mha.hpp"
#include "src/attention/layer.hpp"
#include "src/attention/mha_layer_weights.hpp"

namespace attn {

MhaGradients MultiHeadAttention::backward(const MhaActivations& saved, const Tensor& d_y_in) const {
  const detail::AttentionLayerShape shape = detail::layer_shape(config_);
  const detail::LayerWeights w(*this);
  const int64_t d_model = config_.d_model, width = shape.qkv_width();
  ATTN_CHECK(saved.x.defined() && saved.qkv.defined() && saved.attended.defined() &&
                 saved.logsumexp.defined() && saved.x.rank() == 3 && saved.qkv.rank() == 3 &&
                 saved.qkv.dim(2) == width &&
                 saved.attended.numel() == saved.x.dim(0) * saved.x.dim(1) * shape.merged_width(),
             "MultiHeadAttention::backward: `saved` must come from forward(x, options, saved) on "
             "this layer");
  const int64_t b = saved.x.dim(0), t = saved.x.dim(1);
  ATTN_CHECK(d_y_in.defined() && d_y_in.shape() == (Shape{b, t, d_model}),
             "MultiHeadAttention::backward: d_y must be (", b, ", ", t, ", ", d_model, "), got ",
             d_y_in.defined() ? d_y_in.shape_string() : "undefined");
  detail::check_finite(d_y_in, "MultiHeadAttention::backward", "d_y");
  const Tensor d_y = d_y_in.contiguous(), x = saved.x.contiguous();

  MhaGradients grads;
  grads.dx = Tensor({b, t, d_model});
  grads.dwqkv = Tensor(wqkv.shape());
  grads.dwo = Tensor(wo.shape());
  if (bqkv.defined()) grads.dbqkv = Tensor(bqkv.shape());
  if (bo.defined()) grads.dbo = Tensor(bo.shape());
  auto data_or_null = [](Tensor& g) { return g.defined() ? g.data() : nullptr; };
  const detail::AttentionLayerGradients into{grads.dwqkv.data(), data_or_null(grads.dbqkv),
                                             grads.dwo.data(), data_or_null(grads.dbo)};
  detail::AttentionLayerScratch scratch{Tensor({b, t, width}),
                                        Tensor({b, t, config_.n_heads, head_dim()})};
  Tensor logsumexp = saved.logsumexp;  // a handle: the backward only reads it
  const detail::AttentionLayerState state{saved.qkv, saved.attended, logsumexp.data()};
  detail::attention_layer_backward(shape, w.view, x.data(), state, d_y.data(), saved.options,
                                   config_.precision, scratch, grads.dx.data(), false, into);
  return grads;
}

}  // namespace attn
