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
  check_float_dtype(o.precision, "train: precision");
  ATTN_CHECK(o.batch_size >= 1, "train: batch_size must be >= 1, got ", o.batch_size);
  ATTN_CHECK(o.max_iters >= 0, "train: max_iters must be >= 0, got ", o.max_iters);
  ATTN_CHECK(o.warmup_iters >= 0 && o.lr_decay_iters >= 0,
             "train: warmup and decay iterations must be >= 0");
  ATTN_CHECK(o.grad_accum >= 1, "train: grad_accum must be >= 1, got ", o.grad_accum);
  ATTN_CHECK(o.eval_iters >= 1, "train: eval_iters must be >= 1, got ", o.eval_iters);
  ATTN_CHECK(o.eval_interval >= 1, "train: eval_interval must be >= 1, got ", o.eval_interval);
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

void Trainer::set_eval_interval(int64_t n) {
  ATTN_CHECK(n >= 1, "train: eval_interval must be >= 1, got ", n);
  options_.eval_interval = n;
}

float Trainer::learning_rate_at(int64_t iter) const {
  const TrainOptions& o = options_;
  const int64_t decay = o.lr_decay_iters > 0 ? o.lr_decay_iters : o.max_iters;
  return learning_rate(iter, o.lr, o.min_lr, o.warmup_iters, decay);
}

void Trainer::set_group(std::shared_ptr<TrainingGroup> group) {
  ATTN_CHECK(!group || group->size() <= options_.batch_size, "train: ", group ? group->size() : 0,
             " processes need a batch_size of at least as many windows, got ", options_.batch_size);
  group_ = std::move(group);
}

bool Trainer::replicas_agree() const {
  if (!group_) return true;
  const Tensor& p = model_.parameters();
  return group_->same_on_every_rank({p.data(), static_cast<size_t>(p.numel())});
}

StepResult Trainer::step() {
  const TrainOptions& o = options_;
  StepResult r{iteration_, 0.0f, learning_rate_at(iteration_), 0.0f};
  // This rank's windows of each batch: all of them in a single process.
  const int64_t ranks = group_ ? group_->size() : 1, rank = group_ ? group_->rank() : 0;
  const int64_t first = rank * o.batch_size / ranks;
  const int64_t count = (rank + 1) * o.batch_size / ranks - first;
  const int64_t t = config_.block_size;
  // The mean over the whole batch is the rows' share of it: count/B of this rank's mean.
  const double share = static_cast<double>(count) / static_cast<double>(o.batch_size);
  model_.zero_grad();
  double loss = 0.0;  // this rank's share of the batches' mean losses
  for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
    const Windows w = sample(train_, o.batch_size, data_rng_);
    const uint64_t dropout_seed =
        o.seed * 1000003 + static_cast<uint64_t>(iteration_ * o.grad_accum + micro);
    const std::span<const int64_t> ids(w.ids.data() + first * t, static_cast<size_t>(count * t));
    const std::span<const int64_t> targets(w.targets.data() + first * t,
                                           static_cast<size_t>(count * t));
    const float l = model_.forward(ids, targets, count, dropout_seed, first);
    // A non-finite loss is checked once it is summed, so that every rank stops together; its
    // backward pass only spreads the NaN into gradients that are never applied.
    loss += share * static_cast<double>(l);
    const bool last = micro + 1 == o.grad_accum;
    const float scale = static_cast<float>(share / static_cast<double>(o.grad_accum));
    if (group_ && last) {
      Tensor& g = model_.gradients();
      group_->start_gradients({g.data(), static_cast<size_t>(g.numel())});
      model_.backward(scale, [&](int64_t offset) { group_->gradients_final_from(offset); });
      group_->finish_gradients();
    } else {
      model_.backward(scale);
    }
  }
  if (group_) group_->sum({&loss, 1}, "the loss sum");
  r.loss = static_cast<float>(loss / static_cast<double>(o.grad_accum));
  ATTN_CHECK(std::isfinite(r.loss), "training diverged at iteration ", iteration_, ": the loss is ",
             r.loss, " (learning rate ", r.lr, "; a smaller one may help)");
  r.grad_norm = grad_norm(model_);
  optimizer_.step(model_, r.lr, clip_scale(r.grad_norm, o.grad_clip));
  ++iteration_;
  return r;
}

// With a group, rank r computes batches r, r + N, …; each batch's loss is then summed with
// zeros from the other ranks (exact), and the total runs in batch order: the value a single
// process gives, to the bit.
float Trainer::mean_loss(const std::vector<int64_t>& split, uint64_t seed) const {
  const int64_t ranks = group_ ? group_->size() : 1, rank = group_ ? group_->rank() : 0;
  std::mt19937_64 rng(seed);  // a fresh generator: the same batches at every evaluation
  std::vector<double> losses(static_cast<size_t>(options_.eval_iters), 0.0);
  for (int64_t i = 0; i < options_.eval_iters; ++i) {
    const Windows w = sample(split, options_.batch_size, rng);  // every rank draws every batch
    if (i % ranks != rank) continue;
    losses[static_cast<size_t>(i)] = model_.loss(w.ids, w.targets, options_.batch_size);
  }
  if (group_) group_->sum(losses, "the evaluation loss sum");
  double total = 0.0;
  for (double l : losses) total += l;
  return static_cast<float>(total / static_cast<double>(options_.eval_iters));
}

EvalResult Trainer::evaluate() const {
  return {mean_loss(train_, options_.seed + 1), mean_loss(val_, options_.seed + 2)};
}

}  // namespace attn
