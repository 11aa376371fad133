// The training run (attn/training_run.hpp): the loop that was the CLI's, so that every front
// end trains the same way.
#include "attn/training_run.hpp"

#include <chrono>
#include <optional>
#include <utility>

#include "attn/error.hpp"
#include "attn/simd.hpp"
#include "src/train/metrics_csv.hpp"

namespace attn {
namespace {

using Clock = std::chrono::steady_clock;

bool leads(const Trainer& trainer) {
  return trainer.group() == nullptr || trainer.group()->rank() == 0;
}

}  // namespace

TrainingRun::TrainingRun(Trainer& trainer, Tokenizer tokenizer, TrainingRunOptions options,
                         TrainingCallbacks callbacks)
    : trainer_(trainer),
      tokenizer_(std::move(tokenizer)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {
  ATTN_CHECK(tokenizer_.vocab_size() == trainer_.model().config().vocab_size,
             "TrainingRun: the tokenizer has ", tokenizer_.vocab_size(), " tokens, the model ",
             trainer_.model().config().vocab_size);
  // bf16 products pay only where the CPU has AVX-512 BF16; elsewhere the rounding costs and
  // nothing comes back (59 against 49 ms/iter in float on a Zen 3).
  if (trainer_.options().precision == Dtype::kBFloat16 && !simd_has_bf16_products()) {
    trainer_.model().set_training_precision(Dtype::kFloat32);
    if (callbacks_.notice && leads(trainer_)) {
      callbacks_.notice("--precision bf16: this CPU (" + simd_target() +
                        ") has no AVX-512 BF16, so the products run in float, which is faster "
                        "here");
    }
  }
  if (options_.resumed && !options_.dir.empty() && leads(trainer_)) {
    detail::truncate_metrics(options_.dir + "/metrics.csv", trainer_.iteration(), evaluates_now());
  }
}

bool TrainingRun::evaluates_now() const {
  return trainer_.iteration() % trainer_.options().eval_interval == 0 || trainer_.done();
}

std::string TrainingRun::checkpoint_path() const {
  return options_.dir.empty() ? std::string() : options_.dir + "/checkpoint.safetensors";
}

void TrainingRun::save() {
  if (options_.dir.empty()) return;
  trainer_.save(checkpoint_path(), tokenizer_);
  if (callbacks_.checkpoint_written) callbacks_.checkpoint_written();
}

// An evaluation; in a data-parallel run also the check that every rank still holds the same
// parameters (the gradient sums give every rank the same bits, so they cannot drift apart
// unless something is wrong — a rank on a different CPU or library, say). Evaluation is
// collective: every rank makes it.
EvalResult TrainingRun::evaluate() {
  const EvalResult e = trainer_.evaluate();
  ATTN_CHECK(trainer_.replicas_agree(), "the processes' parameters differ after iteration ",
             trainer_.iteration(), "; data-parallel training needs the same attn build and CPU ",
             "kind on every rank");
  return e;
}

void TrainingRun::follow() {
  while (true) {
    if (evaluates_now()) evaluate();
    if (trainer_.done()) return;
    trainer_.step();
  }
}

RunEnd TrainingRun::run() {
  if (!leads(trainer_)) {
    follow();
    return RunEnd::kFinished;
  }
  std::optional<detail::MetricsCsv> metrics;
  if (!options_.dir.empty()) metrics.emplace(options_.dir + "/metrics.csv", options_.resumed);
  const TrainOptions& o = trainer_.options();
  const double tokens_per_step =
      static_cast<double>(o.batch_size * o.grad_accum * trainer_.model().config().block_size);
  while (true) {
    const int64_t iter = trainer_.iteration();
    if (evaluates_now()) {
      const EvalResult e = evaluate();
      if (metrics) metrics->evaluation(iter, e, trainer_.learning_rate_at(iter));
      if (callbacks_.evaluation) callbacks_.evaluation(iter, e);
      save();
    }
    if (trainer_.done()) return RunEnd::kFinished;
    if (callbacks_.should_stop && callbacks_.should_stop()) {
      save();
      return RunEnd::kStopped;
    }
    if (callbacks_.before_step) callbacks_.before_step();
    const Clock::time_point start = Clock::now();
    const StepResult r = trainer_.step();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    step_seconds_ += seconds;
    ++steps_run_;
    if (metrics) metrics->step(r, seconds * 1e3, tokens_per_step / seconds);
    if (callbacks_.after_step) callbacks_.after_step(r, seconds);
  }
}

}  // namespace attn
