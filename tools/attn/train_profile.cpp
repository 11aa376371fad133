#include "train_profile.hpp"

#include <cstdio>

#include "attn/gpt_flops.hpp"
#include "attn/phase_clock.hpp"
#include "attn/simd.hpp"
#include "hot/fma_peak.hpp"
#include "phase_table.hpp"

namespace attn::cli {

void StepProfile::start_step() {
  if (!on_) return;
  if (seen_ == warm_up_) reset_phase_totals();
  set_phase_clock(seen_ >= warm_up_);
}

void StepProfile::end_step(double seconds) {
  if (!on_) return;
  set_phase_clock(false);
  if (seen_++ >= warm_up_) {
    step_seconds_ += seconds;
    ++counted_;
  }
}

void StepProfile::print(const GptConfig& config, const TrainOptions& options, int threads) const {
  if (!on_) return;
  if (counted_ == 0) {
    std::printf("profile: no step after the first %lld to time\n",
                static_cast<long long>(warm_up_));
    return;
  }
  const double peak = measure_fma_peak_gflops(threads);
  const double steps = static_cast<double>(counted_);
  const double windows = static_cast<double>(options.batch_size * options.grad_accum);
  const double step_ms = 1e3 * step_seconds_ / steps;
  std::printf(
      "profile of %lld steps (after the first %lld), %d thread(s), %s; measured FMA peak %.0f "
      "GFLOP/s\n",
      static_cast<long long>(counted_), static_cast<long long>(warm_up_), threads,
      simd_target().c_str(), peak);
  const PassFlops flops{training_matmul_flops(config, windows),
                        training_attention_flops(config, windows)};
  print_phase_table(phase_totals(), steps, step_ms, flops, peak, "step");
  std::printf(
      "  (the rest: residual adds, dropout, the heads' reshapes, sampling the batch; MFLOP "
      "counts the products only)\n");
}

}  // namespace attn::cli
