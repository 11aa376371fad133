// The small GPT's training step (`attn train`'s defaults: 4 layers, 4 heads, n_embd 128, block
// 64, batch 12; forward, backward, clipping, AdamW) timed as the least of several steps, with
// `attn bench`'s own FMA peak probed after each round (bench/least_rounds.hpp), as
// forward_least does for the attention forward: on a shared host the median moves with the
// neighbours, while the least step of a round is what the code does with the cores to itself. The
// tokens are random ids (the step's work does not depend on them). The fraction is the least step's
// rate (products and attention, gpt_flops.hpp's count, as `attn train --profile`) against the
// largest peak measured. With `both`, a float and a bf16 trainer take turns, round by round,
// and the float ÷ bf16 ratio of their least and median steps is one of the same minutes of the
// host (issue 46 asks ≥ 1.4×). A benchmark, not a test; docs/performance.md has its figures.
//
//   build/release/step_least [THREADS=2] [STEPS=50] [ROUNDS=5] [bf16|both]
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
#include "bench/least_rounds.hpp"

namespace {

// A trainer of attn train's defaults on random ids, its first steps taken (the pool started,
// the buffers made).
attn::Trainer warm_trainer(const attn::GptConfig& config, attn::Dtype precision) {
  attn::TrainOptions options;
  options.max_iters = 1'000'000;
  options.precision = precision;
  std::mt19937_64 rng(7);
  std::vector<int64_t> tokens(200'000);
  for (int64_t& id : tokens)
    id = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
  attn::Trainer trainer(config, options, std::move(tokens));
  for (int i = 0; i < 10; ++i) trainer.step();
  return trainer;
}

double ms_of_step(attn::Trainer& trainer) {
  const auto start = std::chrono::steady_clock::now();
  trainer.step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Float and bf16 steps taking turns, a round's `steps` of each in a row: step by step, each
// trainer's working set (some 40 MB: activations, parameters, AdamW's moments) was evicted by the
// other's, and both ran 8–10 % slower than in a training loop.
int alternate(int rounds, int steps, const attn::GptConfig& config) {
  attn::Trainer f32 = warm_trainer(config, attn::Dtype::kFloat32);
  attn::Trainer bf16 = warm_trainer(config, attn::Dtype::kBFloat16);
  std::vector<double> all_f32, all_bf16;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> f, b;
    for (int s = 0; s < steps; ++s) f.push_back(ms_of_step(f32));
    for (int s = 0; s < steps; ++s) b.push_back(ms_of_step(bf16));
    const double least_f = *std::min_element(f.begin(), f.end());
    const double least_b = *std::min_element(b.begin(), b.end());
    std::printf("round %d: least float %.2f ms, bf16 %.2f ms: %.2fx; medians %.2f / %.2f: %.2fx\n",
                r + 1, least_f, least_b, least_f / least_b, median(f), median(b),
                median(f) / median(b));
    all_f32.insert(all_f32.end(), f.begin(), f.end());
    all_bf16.insert(all_bf16.end(), b.begin(), b.end());
  }
  const double least_f = *std::min_element(all_f32.begin(), all_f32.end());
  const double least_b = *std::min_element(all_bf16.begin(), all_bf16.end());
  std::printf(
      "small GPT step, float and bf16 products taking turns: least %.2f / %.2f ms = %.2fx, "
      "median %.2f / %.2f ms = %.2fx\n",
      least_f, least_b, least_f / least_b, median(all_f32), median(all_bf16),
      median(all_f32) / median(all_bf16));
  attn::set_num_threads(0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 50;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  const std::string mode = argc > 4 ? argv[4] : "";
  const bool bf16 = mode == "bf16";
  attn::set_num_threads(threads);
  const attn::GptConfig config;  // attn train's defaults
  if (mode == "both") return alternate(rounds, steps, config);
  attn::Trainer trainer =
      warm_trainer(config, bf16 ? attn::Dtype::kBFloat16 : attn::Dtype::kFloat32);
  const double windows = static_cast<double>(attn::TrainOptions{}.batch_size);
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
