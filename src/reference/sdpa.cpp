// The reference scaled dot-product attention, step by step as in the textbook:
//   scores  = Q·Kᵀ · scale            (Tq, Tk)
//   scores  = c·tanh(scores / c)      soft-capping, when asked
//   scores −= slope·|pos_i − j|       ALiBi, when asked
//   scores += mask                    (-inf where a key is not allowed)
//   weights = softmax(scores)         rows sum to 1 (or are all 0 when nothing is allowed); with
//                                     a sink, e^{sink} joins every denominator
//   output  = weights · V             (Tq, dv)
// With bf16 products (SdpaOptions::precision) Q, K, V and the weights entering weights · V are
// rounded to bfloat16 first (src/reference/product_operand.hpp). Every (batch, head) pair is one
// independent problem of 2-D matrices; the scores' steps are in src/reference/head_scores.cpp.
#include "attn/sdpa.hpp"

#include <cmath>
#include <limits>

#include "attn/error.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/threads.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/head_scores.hpp"
#include "src/reference/product_operand.hpp"

namespace attn {

namespace reference {

SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  const detail::AttentionDims dims = detail::check_attention(q, k, v, options);
  const Shape weights_shape = detail::with_last_dim(q, dims.tk);
  detail::check_weights_fit(dims, weights_shape, "reference::sdpa");
  detail::check_finite_qkv("reference::sdpa", q, k, v);
  const Tensor mask4 = detail::broadcast_mask(options.mask, weights_shape);

  SdpaResult result{Tensor(detail::with_last_dim(q, dims.dv)), Tensor(weights_shape), Tensor{}};
  // bf16 products: Q, K, V rounded, and the weights rounded for P·V (they are returned unrounded).
  const Dtype precision = options.precision;
  const Tensor q4 = detail::as_rank4(detail::product_operand(q, precision));
  const Tensor k4 = detail::as_rank4(detail::product_operand(k, precision));
  const Tensor v4 = detail::as_rank4(detail::product_operand(v, precision));
  const Tensor out4 = detail::as_rank4(result.output);
  const Tensor weights4 = detail::as_rank4(result.weights);
  const int64_t group = dims.heads / dims.kv_heads;  // query heads per K/V head

  parallel_for(dims.batch * dims.heads, [&](int64_t bh) {
    const int64_t b = bh / dims.heads, h = bh % dims.heads, kv_h = h / group;
    const Tensor mask_h = mask4.defined() ? mask4.select(b).select(h) : Tensor{};
    const Tensor scores = detail::head_scores(q4.select(b).select(h), k4.select(b).select(kv_h),
                                              mask_h, dims, options, b, h)
                              .scores;
    const Tensor weights = options.sinks.empty()
                               ? softmax(scores)
                               : detail::softmax_with_sink(scores, options.sinks[h]);
    const Tensor output =
        reference::matmul(detail::product_operand(weights, precision), v4.select(b).select(kv_h));
    weights4.select(b).select(h).copy_from(weights);
    out4.select(b).select(h).copy_from(output);
  });
  return result;
}

}  // namespace reference

}  // namespace attn
