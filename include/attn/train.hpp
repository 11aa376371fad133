// Training a Gpt: AdamW, the learning-rate schedule, gradient clipping, the data windows, and
// checkpoints that resume to the same loss curve.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attn/gpt.hpp"
#include "attn/tokenizer.hpp"

namespace attn {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.99f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;      // decoupled; only on parameters whose table entry says decay
  bool decay_embeddings = false;  // also decay wte and wpe (as nanoGPT does: all 2-D tensors)
};

// AdamW (Loshchilov & Hutter), step for step as torch.optim.AdamW:
//   θ ← θ·(1 − lr·λ)                       (decay-marked parameters only)
//   m ← β₁m + (1 − β₁)g,  v ← β₂v + (1 − β₂)g²
//   θ ← θ − lr/(1 − β₁ᵗ) · m / (√v/√(1 − β₂ᵗ) + ε)
class AdamW {
 public:
  AdamW(const Gpt& model, const AdamWOptions& options);
  // One update from the model's gradients, each taken times grad_scale (clip_scale's factor:
  // clipping without a pass that rewrites the gradients).
  void step(Gpt& model, float lr, float grad_scale = 1.0f);
  const AdamWOptions& options() const { return options_; }
  int64_t steps = 0;  // t
  Tensor m, v;        // the moments, in the parameter buffer's layout

 private:
  // A run of the parameter buffer with or without weight decay.
  struct Span {
    int64_t offset, size;
    bool decay;
  };
  AdamWOptions options_;
  std::vector<Span> spans_;  // in buffer order, covering it
};

// The global L2 norm of the model's gradients (summed in double over fixed chunks: the same
// for every thread count).
float grad_norm(const Gpt& model);

// The factor that brings a gradient of this norm to at most max_norm, as
// torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6) when that is below 1, else 1 (and 1
// when max_norm ≤ 0: no clipping). Throws attn::Error when norm is not finite.
float clip_scale(float norm, float max_norm);

// Scales the gradients in place by clip_scale(grad_norm(model), max_norm). Returns the norm
// before clipping. max_norm ≤ 0 only measures.
float clip_grad_norm(Gpt& model, float max_norm);

// Linear warm-up over warmup_iters, then cosine decay from lr to min_lr at decay_iters, then
// min_lr (nanoGPT's schedule): warm-up gives lr·(iter + 1)/(warmup_iters + 1).
float learning_rate(int64_t iter, float lr, float min_lr, int64_t warmup_iters,
                    int64_t decay_iters);

struct TrainOptions {
  int64_t batch_size = 12;
  int64_t max_iters = 2000;
  int64_t warmup_iters = 100;
  int64_t lr_decay_iters = 0;  // 0: max_iters
  float lr = 1e-3f;
  float min_lr = 1e-4f;
  float grad_clip = 1.0f;   // ≤ 0: off
  int64_t grad_accum = 1;   // micro-batches per step, each of batch_size windows
  int64_t eval_iters = 20;  // batches per loss estimate
  // Steps between evaluations and checkpoints of a TrainingRun (attn/training_run.hpp); saved
  // in the checkpoint, so a resumed run keeps its cadence.
  int64_t eval_interval = 250;
  AdamWOptions adamw;
  uint64_t seed = 1337;
  double val_fraction = 0.1;  // the last part of the tokens is the validation split
  // The training passes' matrix products (Gpt::set_training_precision): kBFloat16 is mixed
  // precision, bf16 operands with float sums, parameters, moments and evaluation in float.
  Dtype precision = Dtype::kFloat32;
};

struct StepResult {
  int64_t iter;  // the iteration just done (0-based)
  float loss;    // mean over its micro-batches
  float lr;
  float grad_norm;  // before clipping
};

struct EvalResult {
  float train_loss, val_loss;  // over the same fixed batches at every evaluation
};

struct Safetensors;  // attn/io.hpp

// The processes a Trainer shares its steps with (data parallel; attn::distributed::DataParallel
// is the MPI one). Every rank holds the same parameters and draws the same batches; rank r runs
// windows [r·B/N, (r+1)·B/N) of each batch of B, and the group sums what the ranks computed.
// Every call is collective: each rank makes it, in the same order.
class TrainingGroup {
 public:
  virtual ~TrainingGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Element-wise sums over the ranks, in place; every rank gets the same bits. `what` names
  // the sum in an error (a rank that stopped answering: "the loss sum did not finish …").
  virtual void sum(std::span<double> values, const std::string& what) = 0;
  // One backward pass's gradients, summed over the ranks in place: start_gradients, then
  // gradients_final_from(o) as the backward pass finishes gradients [o, end) (o falls to 0),
  // then finish_gradients, after which every element is the sum (the same bits everywhere).
  virtual void start_gradients(std::span<float> gradients) = 0;
  virtual void gradients_final_from(int64_t offset) = 0;
  virtual void finish_gradients() = 0;
  // Whether values holds the same bits on every rank (a check that the replicas agree).
  virtual bool same_on_every_rank(std::span<const float> values) = 0;
};

class Trainer {
 public:
  // tokens: the whole corpus as ids; the first 1 − val_fraction is for training. Throws
  // attn::Error when either split is shorter than block_size + 1.
  Trainer(const GptConfig& config, const TrainOptions& options, std::vector<int64_t> tokens,
          uint64_t init_seed = 0);

  StepResult step();
  EvalResult evaluate() const;
  // The schedule's learning rate at an iteration (lr_decay_iters 0 meaning max_iters).
  float learning_rate_at(int64_t iter) const;
  int64_t iteration() const { return iteration_; }                    // steps done
  size_t token_count() const { return train_.size() + val_.size(); }  // both splits
  bool done() const { return iteration_ >= options_.max_iters; }
  Gpt& model() { return model_; }
  const Gpt& model() const { return model_; }
  const TrainOptions& options() const { return options_; }
  // Extends the run (for --resume with a larger --max-iters).
  void set_max_iters(int64_t n);
  // Batches per loss estimate; changes what evaluate() measures, never the training itself.
  void set_eval_iters(int64_t n);
  void set_eval_interval(int64_t n);  // for a resumed run that evaluates more or less often
  // Shares the steps and evaluations with a group of processes (data parallel): step() runs
  // this rank's windows of each batch and sums the gradients and the loss over the group, so
  // every rank takes the same step, and the loss curve is a single process's up to the order
  // of sums; evaluate() gives each rank every N-th batch. Null: a single process. attn::Error
  // when the group is larger than batch_size (a rank would have no window).
  void set_group(std::shared_ptr<TrainingGroup> group);
  TrainingGroup* group() const { return group_.get(); }
  // Whether the parameters hold the same bits on every rank of the group (true without one).
  bool replicas_agree() const;

  // One safetensors file: the parameters under their names, AdamW's moments under
  // "optimizer.m.<name>" / "optimizer.v.<name>", and in the metadata the format and version,
  // the model config, the training options, the iteration, the data sampler's state, a
  // fingerprint of the tokens, and the tokenizer's JSON. Written to a temporary file and renamed.
  void save(const std::string& path, const Tokenizer& tokenizer) const;
  // Resumes from save(): the same tokens must be given (checked by the fingerprint); training
  // then continues exactly as the uninterrupted run would have.
  static Trainer resume(const std::string& path, std::vector<int64_t> tokens);
  // As resume, for a corpus given as text: encodes it with the tokenizer stored in the
  // checkpoint, which it also returns (the file is read once).
  struct Resumed;
  static Resumed resume_on_text(const std::string& path, std::string_view corpus);

 private:
  struct Windows {
    std::vector<int64_t> ids, targets;
  };
  static Trainer resume_from(const Safetensors& file, std::vector<int64_t> tokens);
  Windows sample(const std::vector<int64_t>& split, int64_t batch, std::mt19937_64& rng) const;
  float mean_loss(const std::vector<int64_t>& split, uint64_t seed) const;

  GptConfig config_;
  TrainOptions options_;
  std::vector<int64_t> train_, val_;
  uint64_t fingerprint_;
  Gpt model_;
  AdamW optimizer_;
  std::mt19937_64 data_rng_;
  int64_t iteration_ = 0;
  std::shared_ptr<TrainingGroup> group_;
};

struct Trainer::Resumed {
  Trainer trainer;
  Tokenizer tokenizer;
};

// A trained model as save() wrote it, for generation.
struct Checkpoint {
  Gpt model;
  Tokenizer tokenizer;
  int64_t iteration;
};
// path: a checkpoint file, or a training directory (its DIR/checkpoint.safetensors). Checks the
// format, version, every tensor's name and shape against the stored config; a broken or
// foreign file is an attn::Error naming the file and what is wrong.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace attn
