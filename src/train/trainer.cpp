// Trainer: data windows, one optimizer step (micro-batches, clipping, schedule, AdamW), and the
// fixed-batch evaluation. Checkpoints are in checkpoint.cpp.
#include <cmath>

#include "attn/error.hpp"
#include "attn/train.hpp"
#include "src/train/train_internal.hpp"

namespace attn {

namespace {

// The split point: the first (1 − val_fraction) of the tokens train.
size_t split_point(size_t n, double val_fraction) {
  return static_cast<size_t>(static_cast<double>(n) * (1.0 - val_fraction));
}

}  // namespace

uint64_t detail::token_fingerprint(const std::vector<int64_t>& tokens) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the ids' bytes
  for (int64_t t : tokens) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(t >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

void detail::check_options(const TrainOptions& o) {
  ATTN_CHECK(o.batch_size >= 1, "train: batch_size must be >= 1, got ", o.batch_size);
  ATTN_CHECK(o.max_iters >= 0, "train: max_iters must be >= 0, got ", o.max_iters);
  ATTN_CHECK(o.warmup_iters >= 0 && o.lr_decay_iters >= 0,
             "train: warmup and decay iterations must be >= 0");
  ATTN_CHECK(o.grad_accum >= 1, "train: grad_accum must be >= 1, got ", o.grad_accum);
  ATTN_CHECK(o.eval_iters >= 1, "train: eval_iters must be >= 1, got ", o.eval_iters);
  ATTN_CHECK(std::isfinite(o.lr) && o.lr > 0.0f && std::isfinite(o.min_lr) && o.min_lr >= 0.0f &&
                 o.min_lr <= o.lr,
             "train: need 0 <= min_lr <= lr, lr > 0; got lr ", o.lr, ", min_lr ", o.min_lr);
  ATTN_CHECK(o.val_fraction > 0.0 && o.val_fraction < 1.0,
             "train: val_fraction must be in (0, 1), got ", o.val_fraction);
}

Trainer::Trainer(const GptConfig& config, const TrainOptions& options, std::vector<int64_t> tokens,
                 uint64_t init_seed)
    : config_(config),
      options_(options),
      fingerprint_(detail::token_fingerprint(tokens)),
      model_(config, init_seed),
      optimizer_(model_, options.adamw),
      data_rng_(options.seed) {
  detail::check_options(options_);
  model_.set_training_precision(options_.precision);
  const size_t split = split_point(tokens.size(), options_.val_fraction);
  const size_t need = static_cast<size_t>(config.block_size) + 1;
  ATTN_CHECK(split >= need && tokens.size() - split >= need, "train: ", tokens.size(),
             " tokens are too few: both the training split (", split,
             ") and the validation split (", tokens.size() - split,
             ") need at least block_size + 1 = ", need);
  for (int64_t t : tokens) {
    ATTN_CHECK(t >= 0 && t < config.vocab_size, "train: token id ", t,
               " outside the vocabulary of ", config.vocab_size);
  }
  val_.assign(tokens.begin() + static_cast<int64_t>(split), tokens.end());
  tokens.resize(split);
  train_ = std::move(tokens);
}

void Trainer::set_max_iters(int64_t n) {
  ATTN_CHECK(n >= 0, "train: max_iters must be >= 0, got ", n);
  options_.max_iters = n;
}

// batch windows of block_size + 1 tokens at uniformly drawn starts.
Trainer::Windows Trainer::sample(const std::vector<int64_t>& split, int64_t batch,
                                 std::mt19937_64& rng) const {
  const int64_t t = config_.block_size;
  const uint64_t starts = split.size() - static_cast<size_t>(t);
  Windows w;
  for (int64_t b = 0; b < batch; ++b) {
    const size_t start = static_cast<size_t>(rng() % starts);
    w.ids.insert(w.ids.end(), split.begin() + static_cast<int64_t>(start),
                 split.begin() + static_cast<int64_t>(start) + t);
    w.targets.insert(w.targets.end(), split.begin() + static_cast<int64_t>(start) + 1,
                     split.begin() + static_cast<int64_t>(start) + t + 1);
  }
  return w;
}

void Trainer::set_eval_iters(int64_t n) {
  ATTN_CHECK(n >= 1, "train: eval_iters must be >= 1, got ", n);
  options_.eval_iters = n;
}

float Trainer::learning_rate_at(int64_t iter) const {
  const TrainOptions& o = options_;
  const int64_t decay = o.lr_decay_iters > 0 ? o.lr_decay_iters : o.max_iters;
  return learning_rate(iter, o.lr, o.min_lr, o.warmup_iters, decay);
}

StepResult Trainer::step() {
  const TrainOptions& o = options_;
  StepResult r{iteration_, 0.0f, learning_rate_at(iteration_), 0.0f};
  model_.zero_grad();
  double loss = 0.0;
  for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
    const Windows w = sample(train_, o.batch_size, data_rng_);
    const uint64_t dropout_seed =
        o.seed * 1000003 + static_cast<uint64_t>(iteration_ * o.grad_accum + micro);
    const float l = model_.forward(w.ids, w.targets, o.batch_size, dropout_seed);
    ATTN_CHECK(std::isfinite(l), "training diverged: the loss is ", l, " at iteration ",
               iteration_);
    loss += l;
    model_.backward(1.0f / static_cast<float>(o.grad_accum));
  }
  r.loss = static_cast<float>(loss / static_cast<double>(o.grad_accum));
  r.grad_norm = grad_norm(model_);
  optimizer_.step(model_, r.lr, clip_scale(r.grad_norm, o.grad_clip));
  ++iteration_;
  return r;
}

float Trainer::mean_loss(const std::vector<int64_t>& split, uint64_t seed) const {
  std::mt19937_64 rng(seed);  // a fresh generator: the same batches at every evaluation
  double total = 0.0;
  for (int64_t i = 0; i < options_.eval_iters; ++i) {
    const Windows w = sample(split, options_.batch_size, rng);
    total += model_.loss(w.ids, w.targets, options_.batch_size);
  }
  return static_cast<float>(total / static_cast<double>(options_.eval_iters));
}

EvalResult Trainer::evaluate() const {
  return {mean_loss(train_, options_.seed + 1), mean_loss(val_, options_.seed + 2)};
}

}  // namespace attn
