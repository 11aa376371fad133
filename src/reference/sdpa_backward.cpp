// The reference attention backward, one formula per step (see attn/sdpa_backward.hpp), from
// the weights P that reference::sdpa materialises. Every (batch, K/V head) pair is an
// independent problem: its query heads are visited in turn and their dK, dV summed.
#include "attn/sdpa_backward.hpp"

#include <cmath>
#include <vector>

#include "attn/error.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/threads.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/finite.hpp"
#include "src/reference/head_scores.hpp"
#include "src/reference/mask_gradient.hpp"
#include "src/reference/product_operand.hpp"

namespace attn {
namespace {

// D_i = Σ_e dO_ie · O_ie, one value per query row.
std::vector<double> row_dots(const Tensor& d_out, const Tensor& out) {
  std::vector<double> dots(static_cast<size_t>(out.dim(0)), 0.0);
  for (int64_t i = 0; i < out.dim(0); ++i) {
    for (int64_t e = 0; e < out.dim(1); ++e) {
      dots[static_cast<size_t>(i)] += double{d_out.at({i, e})} * out.at({i, e});
    }
  }
  return dots;
}

// s·dS, with dS = P ∘ (dP − D): the gradient of the products Q·Kᵀ before scaling. With
// soft-capping, times the cap's slope 1 − tanh² (undefined without).
Tensor score_gradient(const Tensor& p, const Tensor& dp, const std::vector<double>& dots,
                      float scale, const Tensor& softcap_slope) {
  Tensor ds(p.shape());
  for (int64_t i = 0; i < p.dim(0); ++i) {
    for (int64_t j = 0; j < p.dim(1); ++j) {
      const double slope = softcap_slope.defined() ? softcap_slope.at({i, j}) : 1.0;
      ds.at({i, j}) = static_cast<float>(scale * p.at({i, j}) *
                                         (dp.at({i, j}) - dots[static_cast<size_t>(i)]) * slope);
    }
  }
  return ds;
}

// −Σ_i p_sink,i·D_i: the sink's gradient from one head, p_sink,i = e^{sink} / (e^{sink} +
// Σ_j e^{s_ij}) the weight the sink took in row i.
double sink_gradient(const Tensor& scores, float sink, const std::vector<double>& dots) {
  double gradient = 0.0;
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    double max = sink;
    for (int64_t j = 0; j < scores.dim(1); ++j) max = std::fmax(max, scores.at({i, j}));
    double sum = std::exp(sink - max);
    const double sink_term = sum;
    for (int64_t j = 0; j < scores.dim(1); ++j) sum += std::exp(scores.at({i, j}) - max);
    gradient -= sink_term / sum * dots[static_cast<size_t>(i)];
  }
  return gradient;
}

// target += x, element by element (both matrices of one shape).
void add_into(Tensor target, const Tensor& x) {  // a Tensor is a handle: target is a view
  for (int64_t i = 0; i < x.dim(0); ++i) {
    for (int64_t j = 0; j < x.dim(1); ++j) target.at({i, j}) += x.at({i, j});
  }
}

}  // namespace

namespace reference {

SdpaGradients sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_out,
                            const SdpaOptions& options) {
  const detail::AttentionDims dims = detail::check_attention(q, k, v, options);
  detail::check_finite_qkv("reference::sdpa_backward", q, k, v);
  detail::check_output_gradient(q, dims, d_out);
  detail::check_finite(d_out, "reference::sdpa_backward", "d_out");
  const SdpaResult forward = reference::sdpa(q, k, v, options);

  detail::check_mask_gradient_request(options, "reference::sdpa_backward");
  SdpaGradients grads{Tensor(q.shape()), Tensor(k.shape()), Tensor(v.shape()), Tensor{}, Tensor{}};
  // dS = P ∘ (dP − D) per score, when the mask's gradient is asked for.
  const Tensor all_ds =
      options.return_mask_gradient ? Tensor(detail::with_last_dim(q, dims.tk)) : Tensor{};
  const Tensor ds4 = all_ds.defined() ? detail::as_rank4(all_ds) : Tensor{};
  // bf16 products: Q, K, V, dO rounded, and P and dS rounded where they enter a product.
  const Dtype precision = options.precision;
  auto operand = [precision](const Tensor& t) { return detail::product_operand(t, precision); };
  const Tensor q4 = detail::as_rank4(operand(q)), k4 = detail::as_rank4(operand(k)),
               v4 = detail::as_rank4(operand(v));
  const Tensor p4 = detail::as_rank4(forward.weights), o4 = detail::as_rank4(forward.output);
  const Tensor do4 = detail::as_rank4(operand(d_out));
  const Tensor dq4 = detail::as_rank4(grads.dq), dk4 = detail::as_rank4(grads.dk),
               dv4 = detail::as_rank4(grads.dv);
  const int64_t group = dims.heads / dims.kv_heads;

  const Tensor mask4 = detail::broadcast_mask(options.mask, detail::with_last_dim(q, dims.tk));
  // Per (batch, head), summed over the batch in order after: the same bits for any thread count.
  std::vector<double> sink_parts(static_cast<size_t>(dims.batch * dims.heads), 0.0);

  parallel_for(dims.batch * dims.kv_heads, [&](int64_t task) {
    const int64_t b = task / dims.kv_heads, kv_h = task % dims.kv_heads;
    const Tensor k_h = k4.select(b).select(kv_h), v_h = v4.select(b).select(kv_h);
    for (int64_t h = kv_h * group; h < (kv_h + 1) * group; ++h) {
      const Tensor p = p4.select(b).select(h), d_o = do4.select(b).select(h);
      detail::HeadScores scores;  // the scores again, for the variants' gradients
      if (options.softcap > 0.0f || !options.sinks.empty()) {
        const Tensor mask_h = mask4.defined() ? mask4.select(b).select(h) : Tensor{};
        scores = detail::head_scores(q4.select(b).select(h), k_h, mask_h, dims, options, b, h);
      }
      const std::vector<double> dots = row_dots(d_o, o4.select(b).select(h));
      if (!options.sinks.empty()) {
        sink_parts[static_cast<size_t>(b * dims.heads + h)] =
            sink_gradient(scores.scores, options.sinks[static_cast<size_t>(h)], dots);
      }
      const Tensor dp = reference::matmul(d_o, v_h.transpose(0, 1));  // dO·Vᵀ
      const Tensor ds = operand(score_gradient(p, dp, dots, dims.scale, scores.softcap_slope));
      if (ds4.defined()) ds4.select(b).select(h).copy_from(score_gradient(p, dp, dots, 1.0f, {}));
      dq4.select(b).select(h).copy_from(reference::matmul(ds, k_h));  // s·dS·K
      add_into(dk4.select(b).select(kv_h),
               reference::matmul(ds.transpose(0, 1), q4.select(b).select(h)));
      add_into(dv4.select(b).select(kv_h),
               reference::matmul(operand(p).transpose(0, 1), d_o));  // Pᵀ·dO
    }
  });
  if (all_ds.defined()) grads.dmask = detail::reduce_to_mask_shape(all_ds, options.mask);
  if (!options.sinks.empty()) {
    grads.dsinks = Tensor({dims.heads});
    for (int64_t h = 0; h < dims.heads; ++h) {
      double sum = 0.0;
      for (int64_t b = 0; b < dims.batch; ++b)
        sum += sink_parts[static_cast<size_t>(b * dims.heads + h)];
      grads.dsinks.data()[h] = static_cast<float>(sum);
    }
  }
  return grads;
}

}  // namespace reference
}  // namespace attn
