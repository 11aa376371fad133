// The small GPT's training step (`attn train`'s defaults: 4 layers, 4 heads, n_embd 128, block
// 64, batch 12; forward, backward, clipping, AdamW) timed as the least of several steps, with
// `attn bench`'s own FMA peak probed after each round (bench/least_rounds.hpp), as
// forward_least does for the attention forward: on a shared host the median moves with the
// neighbours, while the least step of a round is what the code does with the cores to itself. The
// tokens are random ids (the step's work does not depend on them). The fraction is the least step's
// rate (products and attention, gpt_flops.hpp's count, as `attn train --profile`) against the
// largest peak measured. A benchmark, not a test; docs/performance.md has its figures.
//
//   build/release/step_least [THREADS=2] [STEPS=50] [ROUNDS=5] [bf16]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attn/gpt_flops.hpp"
#include "attn/threads.hpp"
#include "attn/train.hpp"
#include "bench/least_rounds.hpp"

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
  const attn::bench::LeastOfRounds least =
      attn::bench::least_of_rounds(threads, rounds, steps, flops, [&] { trainer.step(); });
  std::printf(
      "small GPT step (%s products), %d thread(s): least %.2f ms, %.0f GFLOP/s = %.0f %% of the "
      "largest peak (%.0f GFLOP/s)\n",
      bf16 ? "bf16" : "float", threads, least.least_ms, least.gflops(flops),
      least.percent_of_peak(flops), least.largest_peak);
  attn::set_num_threads(0);
  return 0;
}
