// What bench/forward_least, prompt_least and step_least share: a call timed as the least of
// several per round, with `attn bench`'s own FMA peak probed after each round. On a shared host
// the median moves with what the neighbours run, while the least time of a round is what the
// code does with the cores to itself; the fraction they print is the least time's rate against
// the largest peak measured.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "tools/attn/hot/fma_peak.hpp"

namespace attn::bench {

struct LeastOfRounds {
  double least_ms = 1e300, largest_peak = 0.0;  // GFLOP/s
  // The least time's rate (GFLOP/s) for `flops` of work, and its share of the largest peak.
  double gflops(double flops) const { return flops / least_ms / 1e6; }
  double percent_of_peak(double flops) const { return 100.0 * gflops(flops) / largest_peak; }
};

// `rounds` rounds of `calls` calls each, printing each round's least time, its rate for `flops`
// of work and the peak probed after it.
template <class Call>
LeastOfRounds least_of_rounds(int threads, int rounds, int calls, double flops, Call&& call) {
  LeastOfRounds result;
  for (int r = 0; r < rounds; ++r) {
    double round_ms = 1e300;
    for (int c = 0; c < calls; ++c) {
      const auto start = std::chrono::steady_clock::now();
      call();
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      round_ms = std::min(round_ms, took.count());
    }
    const double peak = cli::measure_fma_peak_gflops(threads);
    std::printf("round %d: least %.3f ms (%.0f GFLOP/s), FMA peak %.0f GFLOP/s\n", r + 1, round_ms,
                flops / round_ms / 1e6, peak);
    result.least_ms = std::min(result.least_ms, round_ms);
    result.largest_peak = std::max(result.largest_peak, peak);
  }
  return result;
}

}  // namespace attn::bench
