// The fused causal forward (B 1, H 16, d 64) timed as the least of many calls, with `attn
// bench`'s own FMA peak probed after each round (bench/least_rounds.hpp): on a shared host the
// median moves with what the neighbours run (the two-thread peak itself measured 278–389 GFLOP/s
// within a minute on a 2-core VM), while the least of a round is what the code does when it has the
// cores to itself. The fraction is the least time's useful rate against the largest peak measured.
// A benchmark, not a test; docs/performance.md has its figures.
//
//   build/release/forward_least [T=256] [THREADS=2] [CALLS=200] [ROUNDS=5]
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/threads.hpp"
#include "bench/least_rounds.hpp"

int main(int argc, char** argv) {
  const int64_t t = argc > 1 ? std::atoll(argv[1]) : 256;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int calls = argc > 3 ? std::max(1, std::atoi(argv[3])) : 200;
  const int rounds = argc > 4 ? std::max(1, std::atoi(argv[4])) : 5;
  constexpr int64_t kHeads = 16, kWidth = 64;
  attn::set_num_threads(threads);
  const attn::Tensor q = attn::rand_normal({1, kHeads, t, kWidth}, 1),
                     k = attn::rand_normal({1, kHeads, t, kWidth}, 2),
                     v = attn::rand_normal({1, kHeads, t, kWidth}, 3);
  attn::SdpaOptions causal;
  causal.causal = true;
  attn::sdpa(q, k, v, causal);  // the pool started, the pages touched
  // Useful FLOPs: each query's keys up to itself, two products.
  const double useful = 2.0 * kHeads * static_cast<double>(t) * (t + 1) * kWidth;
  const attn::bench::LeastOfRounds least = attn::bench::least_of_rounds(
      threads, rounds, calls, useful, [&] { attn::sdpa(q, k, v, causal); });
  std::printf(
      "T %lld, %d thread(s): least %.3f ms, %.0f useful GFLOP/s = %.0f %% of the largest "
      "peak (%.0f GFLOP/s)\n",
      static_cast<long long>(t), threads, least.least_ms, least.gflops(useful),
      least.percent_of_peak(useful), least.largest_peak);
  attn::set_num_threads(0);
  return 0;
}
