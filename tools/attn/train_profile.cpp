#include "train_profile.hpp"

#include <cstdio>

#include "attn/gpt_flops.hpp"
#include "attn/phase_clock.hpp"
#include "attn/simd.hpp"
#include "hot/fma_peak.hpp"

namespace attn::cli {
namespace {

void print_row(const char* name, double ms, double step_ms, double flops, double peak) {
  std::printf("  %-14s %8.2f %6.1f %%", name, ms, 100.0 * ms / step_ms);
  if (flops > 0.0) {
    const double gflops = flops * 1e-9 / (ms * 1e-3);
    std::printf(" %9.1f %9.1f %6.0f %%", flops * 1e-6, gflops, 100.0 * gflops / peak);
  }
  std::printf("\n");
}

}  // namespace

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
  const PhaseTotals totals = phase_totals();
  const double steps = static_cast<double>(counted_);
  const double windows = static_cast<double>(options.batch_size * options.grad_accum);
  const double step_ms = 1e3 * step_seconds_ / steps;
  std::printf(
      "profile of %lld steps (after the first %lld), %d thread(s), %s; measured FMA peak %.0f "
      "GFLOP/s\n",
      static_cast<long long>(counted_), static_cast<long long>(warm_up_), threads,
      simd_target().c_str(), peak);
  std::printf("  %-14s %8s %8s %9s %9s %7s\n", "phase", "ms/step", "share", "MFLOP", "GFLOP/s",
              "%peak");
  double timed_ms = 0.0;
  for (int i = 0; i < kPhaseCount; ++i) {
    const auto phase = static_cast<Phase>(i);
    const double ms = 1e3 * totals.seconds[static_cast<size_t>(i)] / steps;
    timed_ms += ms;
    const double flops = phase == Phase::kMatmul      ? training_matmul_flops(config, windows)
                         : phase == Phase::kAttention ? training_attention_flops(config, windows)
                                                      : 0.0;
    print_row(phase_name(phase), ms, step_ms, flops, peak);
  }
  print_row("the rest", step_ms - timed_ms, step_ms, 0.0, peak);
  print_row("step", step_ms, step_ms,
            training_matmul_flops(config, windows) + training_attention_flops(config, windows),
            peak);
  std::printf(
      "  (the rest: residual adds, dropout, the heads' reshapes, sampling the batch; MFLOP "
      "counts the products only)\n");
}

}  // namespace attn::cli
