// GPT-2's prompt (random weights in GPT-2 small's shape, 512 tokens through an empty KV cache,
// the last position's logits) timed as the least of several prompts, with `attn bench`'s own
// FMA peak probed after each round (bench/least_rounds.hpp), as forward_least does for the
// attention forward: on a shared host the median moves with the neighbours, while the least time of
// a round is what the code does with the cores to itself. The fraction is the least time's rate
// (products and attention, gpt_flops.hpp's count) against the largest peak measured. A benchmark,
// not a test; docs/performance.md has its figures.
//
// With `bf16` the model keeps its matrices in bfloat16 (`attn bench generate --weights bf16`).
//
//   build/release/prompt_least [THREADS=2] [PROMPTS=5] [ROUNDS=5] [TOKENS=512] [bf16]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attn/gpt.hpp"
#include "attn/gpt_flops.hpp"
#include "attn/hf.hpp"
#include "attn/threads.hpp"
#include "bench/least_rounds.hpp"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int prompts = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  const int64_t tokens = argc > 4 ? std::max(1, std::atoi(argv[4])) : 512;
  const bool bf16 = argc > 5 && std::string(argv[5]) == "bf16";
  attn::set_num_threads(threads);
  const attn::GptConfig config = attn::gpt2_shape("gpt2");
  attn::Gpt model(config, 1);
  if (bf16) model.set_weights_dtype(attn::Dtype::kBFloat16);
  std::mt19937_64 rng(7);
  std::vector<int64_t> prompt(static_cast<size_t>(tokens));
  for (int64_t& id : prompt)
    id = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
  auto run_prompt = [&] {
    attn::GptCache cache = model.make_cache(1);
    return model.decode(prompt, 1, cache, attn::LogitRows::kLast);
  };
  run_prompt();  // the pool started, oneDNN loaded, the pages touched
  const double flops = attn::prompt_flops(config, static_cast<double>(tokens));
  const attn::bench::LeastOfRounds least =
      attn::bench::least_of_rounds(threads, rounds, prompts, flops, run_prompt);
  std::printf(
      "GPT-2 prompt of %lld tokens (%s weights), %d thread(s): least %.1f ms (%.0f tokens/s), %.0f "
      "GFLOP/s = "
      "%.0f %% of the largest peak (%.0f GFLOP/s)\n",
      static_cast<long long>(tokens), bf16 ? "bf16" : "float", threads, least.least_ms,
      1e3 * static_cast<double>(tokens) / least.least_ms, least.gflops(flops),
      least.percent_of_peak(flops), least.largest_peak);
  attn::set_num_threads(0);
  return 0;
}
