// The small GPT's training step (`attn train`'s defaults: 4 layers, 4 heads, n_embd 128, block
// 64, batch 12; forward, backward, clipping, AdamW) timed as the least of several steps, with
// `attn bench`'s own FMA peak probed after each round, as bench/forward_least.cpp does for the
// attention forward: on a shared host the median moves with the neighbours, while the least
// step of a round is what the code does with the cores to itself. The tokens are random ids
// (the step's work does not depend on them). The fraction is the least step's rate (products
// and attention, gpt_flops.hpp's count, as `attn train --profile`) against the largest peak
// measured. A benchmark, not a test; docs/performance.md has its figures.
//
//   build/release/step_least [THREADS=2] [STEPS=50] [ROUNDS=5] [bf16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attn/gpt_flops.hpp"
#include "attn/threads.hpp"
#include "attn/train.hpp"
#include "tools/attn/hot/fma_peak.hpp"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 50;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  const bool bf16 = argc > 4 && std::string(argv[4]) == "bf16";
  attn::set_num_threads(threads);
  const attn::GptConfig config;  // attn train's defaults
  attn::TrainOptions options;
  options.max_iters = 1'000'000;
  if (bf16) options.precision = attn::Dtype::kBFloat16;
  std::mt19937_64 rng(7);
  std::vector<int64_t> tokens(200'000);
  for (int64_t& id : tokens)
    id = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
  attn::Trainer trainer(config, options, std::move(tokens));
  for (int i = 0; i < 10; ++i) trainer.step();  // the pool started, the buffers made
  const double windows = static_cast<double>(options.batch_size);
  const double flops = attn::training_matmul_flops(config, windows) +
                       attn::training_attention_flops(config, windows);
  double least_ms = 1e300, largest_peak = 0.0;
  for (int r = 0; r < rounds; ++r) {
    double round_ms = 1e300;
    for (int s = 0; s < steps; ++s) {
      const auto start = std::chrono::steady_clock::now();
      trainer.step();
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      round_ms = std::min(round_ms, took.count());
    }
    const double peak = attn::cli::measure_fma_peak_gflops(threads);
    std::printf("round %d: least %.2f ms (%.0f GFLOP/s), FMA peak %.0f GFLOP/s\n", r + 1, round_ms,
                flops / round_ms / 1e6, peak);
    least_ms = std::min(least_ms, round_ms);
    largest_peak = std::max(largest_peak, peak);
  }
  std::printf(
      "small GPT step (%s products), %d thread(s): least %.2f ms, %.0f GFLOP/s = %.0f %% of the "
      "largest peak (%.0f GFLOP/s)\n",
      bf16 ? "bf16" : "float", threads, least_ms, flops / least_ms / 1e6,
      100.0 * flops / least_ms / 1e6 / largest_peak, largest_peak);
  attn::set_num_threads(0);
  return 0;
}
