#include "phase_table.hpp"

#include <cstdio>

namespace attn::cli {
namespace {

void print_row(const char* name, double ms, double pass_ms, double flops, double peak) {
  std::printf("  %-14s %8.2f %6.1f %%", name, ms, 100.0 * ms / pass_ms);
  if (flops > 0.0) {
    const double gflops = flops * 1e-9 / (ms * 1e-3);
    std::printf(" %9.1f %9.1f %6.0f %%", flops * 1e-6, gflops, 100.0 * gflops / peak);
  }
  std::printf("\n");
}

}  // namespace

void print_phase_table(const PhaseTotals& totals, double passes, double pass_ms,
                       const PassFlops& flops, double peak_gflops, const char* pass_name) {
  std::printf("  %-14s %8s %8s %9s %9s %7s\n", "phase", "ms", "share", "MFLOP", "GFLOP/s", "%peak");
  double timed_ms = 0.0;
  for (int i = 0; i < kPhaseCount; ++i) {
    if (totals.calls[static_cast<size_t>(i)] == 0) continue;
    const auto phase = static_cast<Phase>(i);
    const double ms = 1e3 * totals.seconds[static_cast<size_t>(i)] / passes;
    timed_ms += ms;
    const double phase_flops = phase == Phase::kMatmul      ? flops.matmul
                               : phase == Phase::kAttention ? flops.attention
                                                            : 0.0;
    print_row(phase_name(phase), ms, pass_ms, phase_flops, peak_gflops);
  }
  print_row("the rest", pass_ms - timed_ms, pass_ms, 0.0, peak_gflops);
  print_row(pass_name, pass_ms, pass_ms, flops.matmul + flops.attention, peak_gflops);
}

}  // namespace attn::cli
