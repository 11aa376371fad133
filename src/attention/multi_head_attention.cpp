// attn::multi_head_attention: the stateless form of the layer (textbook weights Wq, Wk, Wv of
// (d_model, d_model), Wo optional), through the one layer core (layer.hpp). The three
// projections are written into the columns of one QKV buffer, so the weights are never
// concatenated.
#include "attn/error.hpp"
#include "attn/mha.hpp"
#include "src/attention/layer.hpp"
#include "src/attention/mha_checks.hpp"

namespace attn {

MhaResult multi_head_attention(const Tensor& x_in, const Tensor& wq_in, const Tensor& wk_in,
                               const Tensor& wv_in, const Tensor& wo_in, int64_t n_heads,
                               const SdpaOptions& options) {
  detail::check_mha(x_in, wq_in, wk_in, wv_in, wo_in);
  const int64_t d_model = x_in.dim(-1);
  ATTN_CHECK(n_heads >= 1, "split_heads: n_heads (", n_heads, ") must be >= 1");
  ATTN_CHECK(d_model % n_heads == 0, "d_model (", d_model, ") must divide by n_heads (", n_heads,
             ")");
  const bool batched = x_in.rank() == 3;
  const Tensor x = x_in.contiguous();
  const int64_t batch = batched ? x.dim(0) : 1, t = x.dim(-2);
  const Tensor wq = wq_in.contiguous(), wk = wk_in.contiguous(), wv = wv_in.contiguous();
  const Tensor wo = wo_in.defined() ? wo_in.contiguous() : Tensor{};

  detail::AttentionLayerShape shape{d_model, n_heads, n_heads, d_model / n_heads,
                                    wo.defined() ? wo.dim(1) : d_model};
  detail::AttentionLayerWeights weights;
  weights.wq = wq.data();
  weights.wk = wk.data();
  weights.wv = wv.data();
  weights.ld_qkv = d_model;
  weights.wo = wo.defined() ? wo.data() : nullptr;
  detail::AttentionLayerState state{Tensor({batch, t, shape.qkv_width()}),
                                    Tensor({batch, t, n_heads, shape.head_dim}), nullptr};
  Tensor output = wo.defined() ? Tensor({batch, t, shape.d_out}) : Tensor{};
  detail::attention_layer_forward(shape, weights, x.data(), options, MatmulPrecision::kFloat32,
                                  state, wo.defined() ? output.data() : nullptr);
  if (!wo.defined()) output = state.attended.reshape({batch, t, d_model});  // merged heads

  MhaResult result{batched ? output : output.select(0), Tensor{}};
  if (options.return_weights) {
    using detail::QkvPart;
    const Tensor weights_bhtt =
        reference::sdpa(detail::qkv_heads(shape, state.qkv, QkvPart::kQuery),
                        detail::qkv_heads(shape, state.qkv, QkvPart::kKey),
                        detail::qkv_heads(shape, state.qkv, QkvPart::kValue), options)
            .weights;  // (B, H, T, T)
    result.weights = batched ? weights_bhtt : weights_bhtt.select(0);
  }
  return result;
}

}  // namespace attn
