// A training run: the loop around a Trainer that every front end shares (the CLI's `attn
// train`, Python's attn.train, a C++ program) — an evaluation before the first step, every
// options().eval_interval steps and at the end; a checkpoint and a metrics row at each; a stop
// between steps when asked, saving first; the other ranks of a data-parallel group following the
// same steps; and the bf16 fallback, said once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "attn/tokenizer.hpp"
#include "attn/train.hpp"

namespace attn {

// The cadence is the trainer's options().eval_interval, which its checkpoint keeps.
struct TrainingRunOptions {
  // Where the run writes: DIR/checkpoint.safetensors at every evaluation and on a stop, and
  // DIR/metrics.csv (iter,train_loss,val_loss,lr,ms_per_iter,tokens_per_s: a row per step and
  // one per evaluation with the val columns filled). Empty: nothing is written. The directory
  // must exist.
  std::string dir;
  // The trainer resumed DIR's checkpoint: metrics.csv loses the rows past the checkpoint (a
  // killed run's; done by the constructor) and grows from there, so it reads as one run.
  bool resumed = false;
};

// What a front end hears of the run, on the calling thread; each may be empty. In a
// data-parallel group only rank 0 calls them (and writes files); the other ranks follow.
struct TrainingCallbacks {
  std::function<void()> before_step;
  std::function<void(const StepResult&, double seconds)> after_step;
  // An evaluation, before its checkpoint is written; then checkpoint_written, after every
  // checkpoint (at evaluations and on a stop).
  std::function<void(int64_t iteration, const EvalResult&)> evaluation;
  std::function<void()> checkpoint_written;
  std::function<void(const std::string&)> notice;  // said once: the bf16 fallback
  std::function<bool()> should_stop;               // asked before every step
};

enum class RunEnd { kFinished, kStopped };

class TrainingRun {
 public:
  // The trainer must outlive the run; the tokenizer (saved in every checkpoint) is copied.
  // bf16 training on a CPU without AVX-512
  // BF16 products runs its products in float (faster there: the rounding costs and the
  // products gain nothing) and says so through callbacks.notice; the trainer's options keep
  // bf16, so its checkpoint does, and a resume on such a CPU runs in bf16 again.
  TrainingRun(Trainer& trainer, Tokenizer tokenizer, TrainingRunOptions options,
              TrainingCallbacks callbacks = {});

  // Runs to the trainer's max_iters, or until should_stop, which saves a checkpoint (when
  // there is a dir) before returning kStopped.
  RunEnd run();

  bool evaluates_now() const;           // before the next step: at the cadence and at the end
  std::string checkpoint_path() const;  // DIR/checkpoint.safetensors ("" without a dir)
  double step_seconds() const { return step_seconds_; }  // the steps this run took
  int64_t steps_run() const { return steps_run_; }

 private:
  EvalResult evaluate();
  void save();
  void follow();  // a rank other than 0

  Trainer& trainer_;
  Tokenizer tokenizer_;
  TrainingRunOptions options_;
  TrainingCallbacks callbacks_;
  double step_seconds_ = 0.0;
  int64_t steps_run_ = 0;
};

}  // namespace attn
