// The reference scaled dot-product attention, step by step as in the textbook:
//   scores  = Q·Kᵀ · scale            (Tq, Tk)
//   scores += mask                    (-inf where a key is not allowed)
//   weights = softmax(scores)         rows sum to 1 (or are all 0 when nothing is allowed)
//   output  = weights · V             (Tq, dv)
// Every (batch, head) pair is one independent problem of 2-D matrices.
#include "attn/sdpa.hpp"

#include <cmath>
#include <limits>

#include "attn/error.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/threads.hpp"
#include "src/reference/checks.hpp"

namespace attn {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// scores = Q·Kᵀ · scale
Tensor scaled_scores(const Tensor& q, const Tensor& k, float scale) {
  Tensor scores = reference::matmul(q, k.transpose(0, 1));
  float* s = scores.data();
  for (int64_t i = 0; i < scores.numel(); ++i) s[i] *= scale;
  return scores;
}

// scores[i][j] = -inf where the causal (or sliding-window) spec hides key j from query i.
void apply_causal(Tensor& scores, int64_t window, CausalAlign align) {
  const int64_t tq = scores.dim(0), tk = scores.dim(1);
  for (int64_t i = 0; i < tq; ++i) {
    for (int64_t j = 0; j < tk; ++j) {
      if (!causal_allows(i, j, tq, tk, window, align)) scores.at({i, j}) = kMinusInf;
    }
  }
}

// scores[i][j] = -inf for padding keys j >= length.
void apply_key_length(Tensor& scores, int64_t length) {
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    for (int64_t j = length; j < scores.dim(1); ++j) scores.at({i, j}) = kMinusInf;
  }
}

// scores[i][j] = -inf for left-padding keys j < start.
void apply_key_start(Tensor& scores, int64_t start) {
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    for (int64_t j = 0; j < start; ++j) scores.at({i, j}) = kMinusInf;
  }
}

// Boolean: -inf where the mask is false. Additive: scores += mask.
void apply_mask(Tensor& scores, const Tensor& mask, MaskKind kind) {
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    for (int64_t j = 0; j < scores.dim(1); ++j) {
      const float m = mask.at({i, j});
      float& s = scores.at({i, j});
      if (kind == MaskKind::kBoolean) {
        if (m == 0.0f) s = kMinusInf;
      } else {
        s += m;
      }
    }
  }
}

}  // namespace

namespace reference {

SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  const detail::AttentionDims dims = detail::check_attention(q, k, v, options);
  const Shape weights_shape = detail::with_last_dim(q, dims.tk);
  detail::check_weights_fit(dims, weights_shape, "reference::sdpa");
  detail::check_finite_qkv("reference::sdpa", q, k, v);
  const Tensor mask4 = detail::broadcast_mask(options.mask, weights_shape);

  SdpaResult result{Tensor(detail::with_last_dim(q, dims.dv)), Tensor(weights_shape), Tensor{}};
  const Tensor q4 = detail::as_rank4(q), k4 = detail::as_rank4(k), v4 = detail::as_rank4(v);
  const Tensor out4 = detail::as_rank4(result.output);
  const Tensor weights4 = detail::as_rank4(result.weights);
  const int64_t group = dims.heads / dims.kv_heads;  // query heads per K/V head

  parallel_for(dims.batch * dims.heads, [&](int64_t bh) {
    const int64_t b = bh / dims.heads, h = bh % dims.heads, kv_h = h / group;
    Tensor scores = scaled_scores(q4.select(b).select(h), k4.select(b).select(kv_h), dims.scale);
    if (options.causal || options.window > 0)
      apply_causal(scores, options.window, options.causal_align);
    if (!options.key_lengths.empty()) apply_key_length(scores, options.key_lengths[b]);
    if (!options.key_starts.empty()) apply_key_start(scores, options.key_starts[b]);
    if (mask4.defined()) apply_mask(scores, mask4.select(b).select(h), options.mask.kind);
    const Tensor weights = softmax(scores);
    const Tensor output = reference::matmul(weights, v4.select(b).select(kv_h));
    weights4.select(b).select(h).copy_from(weights);
    out4.select(b).select(h).copy_from(output);
  });
  return result;
}

}  // namespace reference

}  // namespace attn
