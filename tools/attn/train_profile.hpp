// attn train --profile: where a training step's time goes, per phase (attn/phase_clock.hpp),
// next to each phase's FLOPs and the FMA peak measured in the same run.
#pragma once

#include <cstdint>

#include "attn/gpt.hpp"
#include "attn/train.hpp"

namespace attn::cli {

class StepProfile {
 public:
  // Off: every call does nothing. The first `warm_up` steps are not counted (as metrics.csv's
  // medians leave out the allocator's and the caches' first steps).
  StepProfile(bool on, int64_t warm_up) : on_(on), warm_up_(warm_up) {}

  // Around each step (evaluations fall outside and are not counted).
  void start_step();
  void end_step(double seconds);

  // The table on stdout, with the FMA peak measured now on `threads` threads.
  void print(const GptConfig& config, const TrainOptions& options, int threads) const;

 private:
  bool on_;
  int64_t warm_up_, seen_ = 0, counted_ = 0;
  double step_seconds_ = 0.0;
};

}  // namespace attn::cli
