// Does mixed-precision training (bf16 operands in every matrix product and in attention's
// products, float sums, parameters and optimizer) learn as float does? attn train's small GPT
// (its defaults: 4 layers, 4 heads, n_embd 128, block 64, batch 12) on a corpus, SEEDS seeds
// in float and the same seeds with TrainOptions::precision = bf16, the val loss at every
// evaluation: is each bf16 run inside the band the float seeds span? An experiment on the
// numerics, not a benchmark: on a CPU without AVX-512 BF16 the library rounds the operands the
// same way and multiplies in float (only slower), so the answer is the same on every CPU.
// The Trainer is used directly: attn train itself runs float on such a CPU, where bf16 only
// costs.
//
//   build/release/bf16_loss_spread CORPUS [ITERS=2000] [SEEDS=5] [EVAL_INTERVAL=250]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/gpt.hpp"
#include "attn/tokenizer.hpp"
#include "attn/train.hpp"

namespace {

// The val loss at each evaluation: iteration 0, every eval_interval, and the last.
std::vector<float> val_curve(const attn::GptConfig& config, attn::TrainOptions options,
                             const std::vector<int64_t>& tokens, uint64_t seed) {
  options.seed = seed;
  attn::Trainer trainer(config, options, tokens, seed);
  std::vector<float> curve{trainer.evaluate().val_loss};
  while (!trainer.done()) {
    trainer.step();
    if (trainer.iteration() % options.eval_interval == 0 || trainer.done()) {
      curve.push_back(trainer.evaluate().val_loss);
    }
  }
  return curve;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t iters = argc > 2 ? std::atoll(argv[2]) : 2000;
  const int seeds = argc > 3 ? std::atoi(argv[3]) : 5;
  const int64_t eval_interval = argc > 4 ? std::atoll(argv[4]) : 250;
  if (argc < 2 || argc > 5 || iters < 1 || seeds < 1 || eval_interval < 1) {
    std::fprintf(stderr,
                 "usage: %s CORPUS [ITERS=2000] [SEEDS=5] [EVAL_INTERVAL=250] (each a whole "
                 "number >= 1)\n",
                 argv[0]);
    return 2;
  }
  std::string corpus;
  try {
    corpus = attn::read_whole_file(argv[1], uint64_t{1} << 30);
  } catch (const attn::Error& e) {
    std::fprintf(stderr, "bf16_loss_spread: %s\n", e.what());
    return 1;
  }
  const attn::CharTokenizer tokenizer = attn::CharTokenizer::train(corpus);
  const std::vector<int64_t> tokens = tokenizer.encode(corpus);
  attn::GptConfig config;
  config.vocab_size = tokenizer.vocab_size();
  attn::TrainOptions options;
  options.max_iters = iters;
  options.eval_interval = eval_interval;

  std::vector<std::vector<float>> float_runs, bf16_runs;
  for (int s = 0; s < seeds; ++s) {
    const auto seed = static_cast<uint64_t>(1337 + s);
    options.precision = attn::Dtype::kFloat32;
    float_runs.push_back(val_curve(config, options, tokens, seed));
    options.precision = attn::Dtype::kBFloat16;
    bf16_runs.push_back(val_curve(config, options, tokens, seed));
    std::fprintf(stderr, "seed %llu done\n", static_cast<unsigned long long>(seed));
  }
  std::printf("val loss, %d seeds (1337 on), %lld iterations; float band min-max, bf16 runs\n",
              seeds, static_cast<long long>(iters));
  std::printf("%6s %17s %17s %8s %12s\n", "iter", "float min-max", "bf16 min-max", "inside",
              "bf16-float");
  int outside_total = 0;
  for (size_t e = 0; e < float_runs[0].size(); ++e) {
    float fmin = 1e30f, fmax = -1e30f, bmin = 1e30f, bmax = -1e30f, worst_pair = 0.0f;
    for (int s = 0; s < seeds; ++s) {
      fmin = std::min(fmin, float_runs[s][e]);
      fmax = std::max(fmax, float_runs[s][e]);
      bmin = std::min(bmin, bf16_runs[s][e]);
      bmax = std::max(bmax, bf16_runs[s][e]);
      const float pair = bf16_runs[s][e] - float_runs[s][e];
      if (std::abs(pair) > std::abs(worst_pair)) worst_pair = pair;
    }
    int inside = 0;
    for (int s = 0; s < seeds; ++s) inside += bf16_runs[s][e] >= fmin && bf16_runs[s][e] <= fmax;
    outside_total += seeds - inside;
    const int64_t iter = std::min<int64_t>(static_cast<int64_t>(e) * eval_interval, iters);
    std::printf("%6lld %8.4f-%-8.4f %8.4f-%-8.4f %5d/%d %+12.4f\n", static_cast<long long>(iter),
                fmin, fmax, bmin, bmax, inside, seeds, worst_pair);
  }
  std::printf("bf16 values outside the float band: %d of %zu\n", outside_total,
              float_runs[0].size() * static_cast<size_t>(seeds));
  return 0;
}
