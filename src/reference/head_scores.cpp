#include "src/reference/head_scores.hpp"

#include <cmath>
#include <limits>

#include "attn/reference_matmul.hpp"

namespace attn::detail {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// scores = Q·Kᵀ · scale
Tensor scaled_scores(const Tensor& q, const Tensor& k, float scale) {
  Tensor scores = reference::matmul(q, k.transpose(0, 1));
  float* s = scores.data();
  for (int64_t i = 0; i < scores.numel(); ++i) s[i] *= scale;
  return scores;
}

// scores = c·tanh(scores / c); returns 1 − tanh², the slope the backward multiplies by.
Tensor apply_softcap(Tensor& scores, float cap) {
  Tensor slope(scores.shape());
  float* s = scores.data();
  float* g = slope.data();
  for (int64_t i = 0; i < scores.numel(); ++i) {
    const double t = std::tanh(double{s[i]} / cap);
    s[i] = static_cast<float>(cap * t);
    g[i] = static_cast<float>(1.0 - t * t);
  }
  return slope;
}

// scores[i][j] −= slope·|pos_i − j|, pos_i = query_position0 + i.
void apply_alibi(Tensor& scores, float slope, int64_t query_position0) {
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    for (int64_t j = 0; j < scores.dim(1); ++j) {
      const auto distance = static_cast<float>(std::llabs(query_position0 + i - j));
      scores.at({i, j}) -= slope * distance;
    }
  }
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

// scores[i][j] = -inf for keys outside [start, length): left and right padding.
void apply_key_range(Tensor& scores, int64_t start, int64_t length) {
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    for (int64_t j = 0; j < scores.dim(1); ++j) {
      if (j < start || j >= length) scores.at({i, j}) = kMinusInf;
    }
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

HeadScores head_scores(const Tensor& q_h, const Tensor& k_h, const Tensor& mask_h,
                       const AttentionDims& dims, const SdpaOptions& options, int64_t b,
                       int64_t h) {
  HeadScores out{scaled_scores(q_h, k_h, dims.scale), Tensor{}};
  if (options.softcap > 0.0f) out.softcap_slope = apply_softcap(out.scores, options.softcap);
  if (!options.alibi_slopes.empty()) {
    apply_alibi(out.scores, options.alibi_slopes[static_cast<size_t>(h)], dims.query_position0);
  }
  if (options.causal || options.window > 0)
    apply_causal(out.scores, options.window, options.causal_align);
  const int64_t start = options.key_starts.empty() ? 0 : options.key_starts[b];
  const int64_t length = options.key_lengths.empty() ? dims.tk : options.key_lengths[b];
  apply_key_range(out.scores, start, length);
  if (mask_h.defined()) apply_mask(out.scores, mask_h, options.mask.kind);
  return out;
}

Tensor softmax_with_sink(const Tensor& scores, float sink) {
  Tensor p = scores.clone();
  const int64_t n = p.dim(-1), rows = p.numel() / n;
  float* row = p.data();
  for (int64_t r = 0; r < rows; ++r, row += n) {
    float max = sink;
    for (int64_t j = 0; j < n; ++j) max = std::fmax(max, row[j]);
    double sum = std::exp(double{sink} - max);
    for (int64_t j = 0; j < n; ++j) sum += std::exp(double{row[j]} - max);  // e^-inf = 0
    for (int64_t j = 0; j < n; ++j)
      row[j] = static_cast<float>(std::exp(double{row[j]} - max) / sum);
  }
  return p;
}

}  // namespace attn::detail
