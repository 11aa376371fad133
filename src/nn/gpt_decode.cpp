// Gpt decoding: new tokens through one KVCache per layer, sampling, and the generation loop.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/gpt.hpp"
#include "src/nn/gpt_internal.hpp"
#include "src/nn/layer_norm.hpp"

namespace attn {

using nn::at_or_null;

GptCache Gpt::make_cache(int64_t batch, Dtype dtype) const {
  ATTN_CHECK(batch >= 1, "Gpt::make_cache: batch must be >= 1, got ", batch);
  GptCache cache;
  for (size_t l = 0; l < layout_->blocks.size(); ++l) {
    cache.layers.push_back(detail::make_layer_cache(nn::attention_shape(config_), batch,
                                                    config_.block_size, dtype, 0));
  }
  return cache;
}

namespace {

// Row b of x (batch·t rows of c) ← sequence b's last row, (b + 1)·t − 1: past row b + 1 when
// t ≥ 2, so in increasing b no row is overwritten before it is read.
void keep_last_rows(float* x, int64_t batch, int64_t t, int64_t c) {
  for (int64_t b = 0; b < batch; ++b) std::copy_n(x + ((b + 1) * t - 1) * c, c, x + b * c);
}

}  // namespace

Tensor Gpt::decode(std::span<const int64_t> ids, int64_t batch, GptCache& cache,
                   LogitRows logit_rows) const {
  check_ids(ids, batch, "decode");
  const int64_t t = static_cast<int64_t>(ids.size()) / batch, rows = batch * t;
  const int64_t c = config_.n_embd, position = cache.position();
  ATTN_CHECK(cache.layers.size() == layout_->blocks.size(), "Gpt::decode: the cache has ",
             cache.layers.size(), " layers, the model ", layout_->blocks.size());
  ATTN_CHECK(position + t <= config_.block_size, "Gpt::decode: ", position, " cached + ", t,
             " new tokens exceed block_size ", config_.block_size);
  const float* params = parameters_.data();
  // Not zeroed: each is written in full before it is read (a 512-token prompt of GPT-2 zeroed
  // 20 MB here for nothing).
  Tensor x = Tensor::uninitialized({batch, t, c}), ln = Tensor::uninitialized({batch, t, c});
  Tensor hidden = Tensor::uninitialized({rows, 4 * c});
  Tensor activated = Tensor::uninitialized({rows, 4 * c});
  Tensor branch = Tensor::uninitialized({rows, c});
  std::vector<float> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  embed(ids, batch, t, position, x.data());
  // With LogitRows::kLast only each sequence's last row goes past the last layer's attention
  // (its keys and values enter the cache all the same): `live` rows of x from there on.
  const bool last_only = logit_rows == LogitRows::kLast && t > 1;
  int64_t live = rows;
  for (size_t l = 0; l < layout_->blocks.size(); ++l) {
    const nn::LayerOffsets& at = layout_->blocks[l];
    const bool trim = last_only && l + 1 == layout_->blocks.size();
    nn::layer_norm_forward(x.data(), params + at.ln1_w, at_or_null(params, at.ln1_b), rows, c,
                           ln.data(), mean.data(), rstd.data());
    detail::attention_layer_decode(
        nn::attention_shape(config_), nn::attention_weights(config_, at, params, bf16_.get()), ln,
        cache.layers[l], SdpaOptions{}, Dtype::kFloat32, branch.data(), trim);
    if (trim) {
      keep_last_rows(x.data(), batch, t, c);
      live = batch;
    }
    const float* a = branch.data();
    float* xs = x.data();
    for (int64_t i = 0; i < live * c; ++i) xs[i] += a[i];
    nn::layer_norm_forward(x.data(), params + at.ln2_w, at_or_null(params, at.ln2_b), live, c,
                           ln.data(), mean.data(), rstd.data());
    nn::mlp_forward(config_, at, params, ln.data(), live, hidden.data(), activated.data(),
                    branch.data(), Dtype::kFloat32, bf16_.get());
    const float* m = branch.data();
    for (int64_t i = 0; i < live * c; ++i) xs[i] += m[i];
  }
  // The final LayerNorm and the head on the live rows: (batch, out_t) of them (with t = 1
  // every row is a last row).
  const int64_t out_t = live / batch;
  nn::layer_norm_forward(x.data(), params + layout_->global.lnf_w,
                         at_or_null(params, layout_->global.lnf_b), live, c, ln.data(), mean.data(),
                         rstd.data());
  Tensor logits({batch, out_t, config_.vocab_size});
  head_logits(ln.data(), live, Dtype::kFloat32, logits.data());
  return logits;
}

namespace {

void check_sampling(const SamplingOptions& options) {
  ATTN_CHECK(options.temperature >= 0.0f && std::isfinite(options.temperature),
             "sample_token: temperature must be >= 0, got ", options.temperature);
  ATTN_CHECK(options.top_k >= 0, "sample_token: top_k must be >= 0, got ", options.top_k);
  ATTN_CHECK(options.top_p > 0.0f && options.top_p <= 1.0f,
             "sample_token: top_p must be in (0, 1], got ", options.top_p);
}

}  // namespace

int64_t sample_token(std::span<const float> logits, const SamplingOptions& options,
                     std::mt19937_64& rng) {
  const int64_t n = static_cast<int64_t>(logits.size());
  ATTN_CHECK(n >= 1, "sample_token: no logits");
  check_sampling(options);
  for (int64_t i = 0; i < n; ++i) {
    ATTN_CHECK(std::isfinite(logits[static_cast<size_t>(i)]), "sample_token: logit ", i, " is ",
               logits[static_cast<size_t>(i)]);
  }
  if (options.temperature == 0.0f) {  // greedy: the first largest logit, top_k and top_p moot
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
  }
  // Candidates by decreasing logit, the lower id first on ties.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = options.top_k > 0 ? std::min(options.top_k, n) : n;
  auto by_logit = [&](int64_t a, int64_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), by_logit);
  // Softmax of logits / T over the k candidates, in double, then one uniform draw.
  const double max = logits[static_cast<size_t>(order[0])];
  std::vector<double> weights(static_cast<size_t>(k));
  double sum = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    weights[static_cast<size_t>(i)] = std::exp(
        (logits[static_cast<size_t>(order[static_cast<size_t>(i)])] - max) / options.temperature);
    sum += weights[static_cast<size_t>(i)];
  }
  // Nucleus: keep the most likely candidates until their probability reaches top_p.
  int64_t kept = k;
  if (options.top_p < 1.0f) {
    double mass = 0.0;
    for (kept = 0; kept < k && mass < static_cast<double>(options.top_p) * sum; ++kept) {
      mass += weights[static_cast<size_t>(kept)];
    }
    sum = mass;
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
  double cumulative = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    cumulative += weights[static_cast<size_t>(i)];
    if (u < cumulative) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(kept - 1)];  // u rounded up to the sum
}

Generator::Generator(const Gpt& model, std::vector<int64_t> prompt, const GenerateOptions& options)
    : model_(model), options_(options), tokens_(std::move(prompt)), rng_(options.seed) {
  ATTN_CHECK(!tokens_.empty(), "generate: the prompt needs at least one token");
  check_sampling(options_.sampling);  // at the start, not at the first token
  const auto block = static_cast<size_t>(model_.config().block_size);
  if (options_.use_cache) cache_ = model_.make_cache(1, options_.cache_dtype);
  start_ = tokens_.size() > block ? tokens_.size() - block : 0;
}

int64_t Generator::next() {
  const int64_t block = model_.config().block_size, vocab = model_.config().vocab_size;
  const auto keep = static_cast<size_t>(std::max<int64_t>(1, block / 2));
  if (tokens_.size() - start_ > static_cast<size_t>(block)) {
    start_ = tokens_.size() - keep;
    cache_.reset();
  }
  const std::span<const int64_t> context(tokens_.data() + start_, tokens_.size() - start_);
  Tensor logits;
  if (options_.use_cache) {
    const std::span<const int64_t> fresh = context.subspan(static_cast<size_t>(cache_.position()));
    logits = model_.decode(fresh, 1, cache_, LogitRows::kLast);
  } else {
    logits = model_.logits(context, 1);
  }
  const int64_t rows = logits.dim(1);
  const std::span<const float> last(logits.data() + (rows - 1) * vocab, static_cast<size_t>(vocab));
  const int64_t token = sample_token(last, options_.sampling, rng_);
  tokens_.push_back(token);
  return token;
}

std::vector<int64_t> generate(const Gpt& model, std::vector<int64_t> tokens,
                              const GenerateOptions& options,
                              const std::function<void(int64_t)>& on_token) {
  ATTN_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
             options.max_new_tokens);
  Generator generator(model, std::move(tokens), options);
  std::vector<int64_t> generated;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    generated.push_back(generator.next());
    if (on_token) on_token(generated.back());
  }
  return generated;
}

}  // namespace attn
