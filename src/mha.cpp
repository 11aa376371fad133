// Multi-head attention, fast path: one GEMM for Q, K and V against [Wq | Wk | Wv], the heads
// as strided views of its output (no transpose copy), the fused kernel writing straight into
// (B, T, H, d_head) order (so merging the heads is free), one GEMM for Wo.
#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/mha.hpp"
#include "src/mha_common.hpp"
#include "src/sdpa_common.hpp"

namespace attn {
namespace {

// [Wq | Wk | Wv]: (d_model, 3·d_model).
Tensor concat_columns(const Tensor& wq, const Tensor& wk, const Tensor& wv) {
  const int64_t d_model = wq.dim(0);
  Tensor wqkv({d_model, 3 * d_model});
  const Tensor parts[] = {wq, wk, wv};
  for (int64_t part = 0; part < 3; ++part) {
    wqkv.as_strided({d_model, d_model}, {3 * d_model, 1}, part * d_model).copy_from(parts[part]);
  }
  return wqkv;
}

}  // namespace

MhaResult multi_head_attention(const Tensor& x_in, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options) {
  detail::check_mha(x_in, wq, wk, wv, wo);
  const int64_t d_model = x_in.dim(-1);
  ATTN_CHECK(n_heads >= 1, "split_heads: n_heads (", n_heads, ") must be >= 1");
  ATTN_CHECK(d_model % n_heads == 0, "d_model (", d_model, ") must divide by n_heads (", n_heads,
             ")");
  const bool batched = x_in.rank() == 3;
  const Tensor x = batched ? x_in : x_in.contiguous().reshape({1, x_in.dim(0), d_model});
  const int64_t batch = x.dim(0), t = x.dim(1), d_head = d_model / n_heads;

  // qkv (B, T, 3·d_model): Q's head h is columns [h·d_head, (h+1)·d_head), K's start at
  // d_model, V's at 2·d_model. Each is viewed as (B, H, T, d_head) by strides alone.
  const Tensor qkv = linear(x, concat_columns(wq, wk, wv));
  auto heads_of = [&](int64_t offset) {
    return qkv.as_strided({batch, n_heads, t, d_head}, {t * 3 * d_model, d_head, 3 * d_model, 1},
                          offset);
  };
  const Tensor q = heads_of(0), k = heads_of(d_model), v = heads_of(2 * d_model);

  Tensor attended({batch, t, n_heads, d_head});  // merged order: (B, T, H, d_head)
  detail::sdpa_into(detail::check_attention(q, k, v, options), q, k, v, options,
                    attended.permute({0, 2, 1, 3}), nullptr);
  const Tensor merged = attended.reshape({batch, t, d_model});
  Tensor output = wo.defined() ? linear(merged, wo) : merged;

  MhaResult result{batched ? output : output.select(0), Tensor{}};
  if (options.return_weights) {
    const Tensor weights = reference::sdpa(q, k, v, options).weights;  // (B, H, T, T)
    result.weights = batched ? weights : weights.select(0);
  }
  return result;
}

}  // namespace attn
