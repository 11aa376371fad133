#include "train_profile.hpp"

#include <cstdio>

#include "attn/phase_clock.hpp"
#include "attn/simd.hpp"
#include "hot/fma_peak.hpp"

namespace attn::cli {
namespace {

// FLOPs of one step's matrix products: each linear layer's forward is 2·rows·in·out, its
// backward twice that (dX and dW). Per layer: Q, K, V (K and V narrower with GQA), the output
// projection, the MLP's two (4·C wide); and the tied head, C × vocab.
double matmul_flops(const GptConfig& c, double rows) {
  const double C = static_cast<double>(c.n_embd);
  const double kv_heads = static_cast<double>(c.n_kv_head > 0 ? c.n_kv_head : c.n_head);
  const double kv_width = kv_heads * C / static_cast<double>(c.n_head);
  const double per_layer = C * (C + 2.0 * kv_width) + C * C + 2.0 * C * 4.0 * C;
  const double weights =
      static_cast<double>(c.n_layer) * per_layer + C * static_cast<double>(c.vocab_size);
  return 3.0 * 2.0 * rows * weights;
}

// The attention kernels' useful FLOPs (the causal triangle): forward 2·T·(T+1)·C per window and
// layer (S = QKᵀ and O = PV), backward 2.5 times that (five such products against two).
double attention_flops(const GptConfig& c, double windows) {
  const double t = static_cast<double>(c.block_size);
  const double forward = 2.0 * t * (t + 1.0) * static_cast<double>(c.n_embd);
  return 3.5 * forward * windows * static_cast<double>(c.n_layer);
}

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
  const double rows = windows * static_cast<double>(config.block_size);
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
    const double flops = phase == Phase::kMatmul      ? matmul_flops(config, rows)
                         : phase == Phase::kAttention ? attention_flops(config, windows)
                                                      : 0.0;
    print_row(phase_name(phase), ms, step_ms, flops, peak);
  }
  print_row("the rest", step_ms - timed_ms, step_ms, 0.0, peak);
  print_row("step", step_ms, step_ms, matmul_flops(config, rows) + attention_flops(config, windows),
            peak);
  std::printf(
      "  (the rest: residual adds, dropout, the heads' reshapes, sampling the batch; MFLOP "
      "counts the products only)\n");
}

}  // namespace attn::cli
