// What the attention backward tests share: a float64 loss written from the definitions, its
// central finite differences, and a guard that forces the fused backward's loop order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "attn/mask.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"
#include "src/attention/fused.hpp"

namespace attn::testing {

// A float64 loss L = Σ G ∘ O for a fixed random G (so dL/dO = G), written from the definitions
// in attn/sdpa.hpp: (B, H, T, ·) arrays; an explicit mask is a (Tq, Tk) table.
struct DoubleProblem {
  int64_t batch, heads, kv_heads, tq, tk, d, dv;
  std::vector<double> q, k, v, g, sinks;
  std::vector<double> bias;  // (B, H, Tq, Tk) added to the scores like an additive mask, or empty
  SdpaOptions options;       // every field but sinks and bias (here, so they can be varied)
};

inline std::vector<double> to_doubles(const Tensor& t) {
  const std::vector<float> f = t.to_vector();
  return {f.begin(), f.end()};
}

inline double attention_loss(const DoubleProblem& p) {
  const SdpaOptions& o = p.options;
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(p.d)));
  const int64_t group = p.heads / p.kv_heads;
  double loss = 0.0;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const double* q = &p.q[static_cast<size_t>((b * p.heads + h) * p.tq * p.d)];
      const double* k = &p.k[static_cast<size_t>((b * p.kv_heads + h / group) * p.tk * p.d)];
      const double* v = &p.v[static_cast<size_t>((b * p.kv_heads + h / group) * p.tk * p.dv)];
      const double* g = &p.g[static_cast<size_t>((b * p.heads + h) * p.tq * p.dv)];
      for (int64_t i = 0; i < p.tq; ++i) {
        const int64_t position = causal_position(i, p.tq, p.tk, o.causal_align);
        std::vector<double> s(static_cast<size_t>(p.tk), -INFINITY);
        for (int64_t j = 0; j < p.tk; ++j) {
          if ((o.causal || o.window > 0) &&
              !causal_allows(i, j, p.tq, p.tk, o.window, o.causal_align))
            continue;
          if (!o.key_lengths.empty() && j >= o.key_lengths[b]) continue;
          if (!o.key_starts.empty() && j < o.key_starts[b]) continue;
          const Mask& m = o.mask;
          if (m.kind == MaskKind::kBoolean && m.values.at({i, j}) == 0.0f) continue;
          double dot = 0.0;
          for (int64_t e = 0; e < p.d; ++e) dot += q[i * p.d + e] * k[j * p.d + e];
          double score = scale * dot;
          if (o.softcap > 0.0f) score = o.softcap * std::tanh(score / o.softcap);
          if (!o.alibi_slopes.empty())
            score -= o.alibi_slopes[h] * static_cast<double>(std::llabs(position - j));
          if (m.kind == MaskKind::kAdditive) score += m.values.at({i, j});
          if (!p.bias.empty())
            score += p.bias[static_cast<size_t>(((b * p.heads + h) * p.tq + i) * p.tk + j)];
          s[static_cast<size_t>(j)] = score;
        }
        const bool sink = !p.sinks.empty();
        double max = sink ? p.sinks[static_cast<size_t>(h)] : -INFINITY;
        for (double x : s) max = std::max(max, x);
        if (max == -INFINITY) continue;  // sees no key and has no sink: output 0
        double total = sink ? std::exp(p.sinks[static_cast<size_t>(h)] - max) : 0.0;
        for (double& x : s) total += (x = std::exp(x - max));
        for (int64_t e = 0; e < p.dv; ++e) {
          double out = 0.0;
          for (int64_t j = 0; j < p.tk; ++j)
            out += s[static_cast<size_t>(j)] / total * v[j * p.dv + e];
          loss += g[i * p.dv + e] * out;
        }
      }
    }
  }
  return loss;
}

// Central differences of loss(p) with respect to every element of the member `x` of p.
template <class Problem, class Loss>
Tensor numerical_gradient(Problem p, std::vector<double> Problem::*x, const Shape& shape,
                          const Loss& loss) {
  Tensor grad(shape);
  const double step = 1e-3;
  for (size_t i = 0; i < (p.*x).size(); ++i) {
    const double saved = (p.*x)[i];
    (p.*x)[i] = saved + step;
    const double up = loss(p);
    (p.*x)[i] = saved - step;
    const double down = loss(p);
    (p.*x)[i] = saved;
    grad.data()[i] = static_cast<float>((up - down) / (2 * step));
  }
  return grad;
}

// Forces the fused backward's loop order for its lifetime (src/attention/fused.hpp): one task per
// (batch, K/V head), or two passes over key and query blocks. By default the order depends on
// the machine's core count; the tests reach both on any machine.
class LoopOrder {
 public:
  enum Kind { kOneTaskPerHead, kTwoPasses };
  explicit LoopOrder(Kind kind) {
    detail::set_backward_two_pass_below(kind == kOneTaskPerHead ? 1 : int64_t{1} << 40);
  }
  ~LoopOrder() { detail::set_backward_two_pass_below(0); }
  LoopOrder(const LoopOrder&) = delete;
  LoopOrder& operator=(const LoopOrder&) = delete;
};

}  // namespace attn::testing
