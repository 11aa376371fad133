// attn::multi_head_attention: the stateless form of the layer (textbook weights Wq, Wk, Wv of
// (d_model, d_model), Wo optional), through the one layer core (layer.hpp). The three
// projections are written into the columns of one QKV buffer, so the weights are never
// concatenated.
#include "attn/error.hpp"
#include "attn/mha.hpp"
#include "src/attention/layer.hpp"
#include "src/core/memory_limit.hpp"
#include "src/reference/mha_checks.hpp"

namespace attn {

MhaResult multi_head_attention(const Tensor& x_in, const Tensor& wq_in, const Tensor& wk_in,
                               const Tensor& wv_in, const Tensor& wo_in, int64_t n_heads,
                               const SdpaOptions& options, const MhaExtras& extras) {
  const int64_t n_kv = detail::check_mha(x_in, wq_in, wk_in, wv_in, wo_in, n_heads, extras);
  const int64_t d_model = x_in.dim(-1), d_head = d_model / n_heads;
  const bool batched = x_in.rank() == 3;
  const int64_t batch = batched ? x_in.dim(0) : 1, t = x_in.dim(-2);
  const int64_t qkv_width = (n_heads + 2 * n_kv) * d_head;
  detail::check_fits_in_memory({batch, t, qkv_width}, "multi_head_attention: Q, K and V");
  if (options.return_weights) {
    detail::check_fits_in_memory({batch, n_heads, t, t}, "multi_head_attention: the weights");
  }
  const Tensor x = x_in.contiguous();
  // The kernels read rows: each input is used in place when contiguous, else copied once.
  auto rows = [](const Tensor& m) { return m.defined() ? m.contiguous() : Tensor{}; };
  auto data = [](const Tensor& m) { return m.defined() ? m.data() : nullptr; };
  const Tensor wq = rows(wq_in), wk = rows(wk_in), wv = rows(wv_in), wo = rows(wo_in);
  const Tensor bq = rows(extras.bq), bk = rows(extras.bk), bv = rows(extras.bv),
               bo = rows(extras.bo);

  detail::AttentionLayerShape shape{
      d_model,     n_heads,         n_kv, d_head, wo.defined() ? wo.dim(1) : d_model,
      extras.rope, extras.rope_base};
  detail::AttentionLayerWeights weights;
  weights.wq = wq.data();
  weights.wk = wk.data();
  weights.wv = wv.data();
  weights.ld_q = d_model;
  weights.ld_k = weights.ld_v = n_kv * d_head;
  weights.bq = data(bq);
  weights.bk = data(bk);
  weights.bv = data(bv);
  weights.wo = data(wo);
  weights.bo = data(bo);
  detail::AttentionLayerState state{Tensor({batch, t, shape.qkv_width()}),
                                    Tensor({batch, t, n_heads, d_head}), nullptr};
  Tensor output = wo.defined() ? Tensor({batch, t, shape.d_out}) : Tensor{};
  detail::attention_layer_forward(shape, weights, x.data(), options, Dtype::kFloat32, state,
                                  wo.defined() ? output.data() : nullptr);
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
