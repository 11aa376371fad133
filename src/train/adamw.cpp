// AdamW, gradient clipping and the learning-rate schedule (include/attn/train.hpp).
#include "src/kernels/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attn/error.hpp"
#include "attn/train.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/reductions.hpp"

namespace attn {
namespace {

// The parameter buffer is cut into chunks of this many elements for the threads: fixed, so
// that sums over it (the gradient norm) do not depend on the thread count.
constexpr int64_t kChunk = 65536;

}  // namespace

AdamW::AdamW(const Gpt& model, const AdamWOptions& options)
    : m(Tensor({model.num_parameters()})), v(Tensor({model.num_parameters()})), options_(options) {
  ATTN_CHECK(options.beta1 >= 0.0f && options.beta1 < 1.0f && options.beta2 >= 0.0f &&
                 options.beta2 < 1.0f,
             "AdamW: betas must be in [0, 1), got ", options.beta1, ", ", options.beta2);
  ATTN_CHECK(options.eps > 0.0f && options.weight_decay >= 0.0f,
             "AdamW: eps must be > 0 and weight_decay >= 0");
  for (const GptParameter& p : model.parameter_table()) {
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    const bool embedding = p.role == ParameterRole::kEmbedding;
    const bool decay = decays(p.role) || (embedding && options.decay_embeddings);
    const bool continues = !spans_.empty() && spans_.back().decay == decay &&
                           spans_.back().offset + spans_.back().size == p.offset;
    if (continues) {
      spans_.back().size += numel;
    } else {
      spans_.push_back({p.offset, numel, decay});
    }
  }
}

void AdamW::step(Gpt& model, float lr, float grad_scale) {
  const detail::PhaseScope clock(Phase::kOptimizer);
  ATTN_CHECK(std::isfinite(lr) && lr >= 0.0f, "AdamW: learning rate must be finite and >= 0, got ",
             lr);
  ++steps;
  const AdamWOptions& o = options_;
  const double t = static_cast<double>(steps);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(o.beta1), t));
  const float sqrt_bias2 =
      static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(o.beta2), t)));
  const kernels::AdamWStep update{o.beta1, o.beta2, lr / bias1, sqrt_bias2, o.eps, grad_scale};
  const float keep_decayed = 1.0f - lr * o.weight_decay;
  float *p = model.parameters().data(), *mm = m.data(), *vv = v.data();
  const float* g = model.gradients().data();
  // Fixed chunks, each cut where a span with or without decay begins.
  detail::parallel_ranges(model.num_parameters(), kChunk, [&](int64_t first, int64_t last) {
    for (const Span& span : spans_) {
      const int64_t begin = std::max(first, span.offset),
                    end = std::min(last, span.offset + span.size);
      if (begin >= end) continue;
      kernels::adamw_update_span(p + begin, mm + begin, vv + begin, g + begin, end - begin,
                                 span.decay ? keep_decayed : 1.0f, update);
    }
  });
}

float grad_norm(const Gpt& model) {
  const detail::PhaseScope clock(Phase::kOptimizer);
  const float* g = model.gradients().data();
  const int64_t n = model.num_parameters();
  // Σ g² in double over fixed chunks, the chunks' sums added in order: the same norm for every
  // thread count.
  std::vector<double> partial(static_cast<size_t>((n + kChunk - 1) / kChunk));
  detail::parallel_ranges(n, kChunk, [&](int64_t first, int64_t last) {
    partial[static_cast<size_t>(first / kChunk)] = kernels::sum_of_squares(g + first, last - first);
  });
  double squares = 0.0;
  for (double p : partial) squares += p;
  return static_cast<float>(std::sqrt(squares));
}

float clip_scale(float norm, float max_norm) {
  ATTN_CHECK(std::isfinite(norm), "training diverged: the gradient norm is ", norm);
  if (max_norm <= 0.0f) return 1.0f;
  const float scale = max_norm / (norm + 1e-6f);
  return scale < 1.0f ? scale : 1.0f;
}

float clip_grad_norm(Gpt& model, float max_norm) {
  const detail::PhaseScope clock(Phase::kOptimizer);
  const float norm = grad_norm(model);
  const float scale = clip_scale(norm, max_norm);
  if (scale < 1.0f) {
    float* g = model.gradients().data();
    detail::parallel_ranges(model.num_parameters(), kChunk, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) g[i] *= scale;
    });
  }
  return norm;
}

float learning_rate(int64_t iter, float lr, float min_lr, int64_t warmup_iters,
                    int64_t decay_iters) {
  if (iter < warmup_iters) {
    return lr * static_cast<float>(iter + 1) / static_cast<float>(warmup_iters + 1);
  }
  if (iter > decay_iters) return min_lr;
  const double ratio = decay_iters > warmup_iters
                           ? static_cast<double>(iter - warmup_iters) /
                                 static_cast<double>(decay_iters - warmup_iters)
                           : 1.0;
  const double coefficient = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return static_cast<float>(min_lr + coefficient * (lr - min_lr));
}

}  // namespace attn
