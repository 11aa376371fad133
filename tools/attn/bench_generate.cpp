// attn bench generate: a GPT-2-shaped model processing a prompt and then generating one token
// at a time through the KV cache, next to the memory-bandwidth limit measured in the same run.
// At batch 1 every weight is read once per generated token, so a token cannot take less than
// (bytes of weights + bytes of K/V read) / read bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/gpt.hpp"
#include "attn/hf.hpp"
#include "attn/threads.hpp"
#include "bench_util.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "hot/bandwidth.hpp"

namespace attn::cli {
namespace {

struct GenerateBenchArgs {
  std::string model, shape = "gpt2", weights = "f32";
  int64_t prompt_tokens = 512, new_tokens = 256;
  std::vector<int> threads;
  int runs = 3;
  bool json = false;
};

struct Timing {
  double prompt_ms, token_ms;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The prompt through the cache, then new_tokens greedy tokens one at a time (the argmax of the
// last logits, as generate() at temperature 0 does).
Timing time_once(const Gpt& model, const std::vector<int64_t>& prompt, int64_t new_tokens) {
  GptCache cache = model.make_cache(1);
  const int64_t vocab = model.config().vocab_size;
  std::mt19937_64 rng(0);
  const SamplingOptions greedy{0.0f, 0, 1.0f};
  auto start = std::chrono::steady_clock::now();
  Tensor logits = model.decode(prompt, 1, cache);
  const double prompt_ms = ms_since(start);
  start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < new_tokens; ++i) {
    const std::span<const float> last(logits.data() + (logits.dim(1) - 1) * vocab,
                                      static_cast<size_t>(vocab));
    const int64_t next[] = {sample_token(last, greedy, rng)};
    logits = model.decode(next, 1, cache);
  }
  return {prompt_ms, new_tokens > 0 ? ms_since(start) / static_cast<double>(new_tokens) : 0.0};
}

// Bytes one generated token reads: every weight once, as held (wte twice: a row for the
// embedding, all of it for the logits; wpe, always float, one row), and K and V of every cached
// position in every layer.
double bytes_per_token(const Gpt& model, int64_t prompt_tokens, int64_t new_tokens) {
  const GptConfig& c = model.config();
  const double wpe = static_cast<double>(c.block_size * c.n_embd);
  const double weights =
      static_cast<double>(model.weight_bytes()) - 4.0 * wpe + 4.0 * static_cast<double>(c.n_embd);
  const double mean_cached = static_cast<double>(prompt_tokens) + (new_tokens - 1) / 2.0;
  const double kv = 2.0 * 4.0 * static_cast<double>(c.n_layer * c.n_embd) * mean_cached;
  return weights + kv;
}

void run_generate_bench(const GenerateBenchArgs& a) {
  ATTN_CHECK(a.prompt_tokens >= 1, "--prompt-tokens must be >= 1");
  // The lengths are checked against the config before the model is built.
  const std::string config_path = a.model + "/config.json";
  const GptConfig c = a.model.empty()
                          ? gpt2_shape(a.shape)
                          : gpt2_config_from_hf(read_whole_file(config_path, kMaxConfigBytes));
  ATTN_CHECK(a.prompt_tokens + a.new_tokens <= c.block_size, "--prompt-tokens + --new-tokens (",
             a.prompt_tokens + a.new_tokens, ") exceed the model's ", c.block_size, " positions");
  check_memory(a.model.empty() ? "--shape " + a.shape : a.model,
               8.0 * static_cast<double>(parameter_count(c)));  // parameters and the mapped file
  Gpt model = a.model.empty() ? Gpt(c, 1) : gpt_from_hf(a.model);
  model.set_weights_dtype(weights_dtype_from_string(a.weights));
  std::mt19937_64 rng(7);
  std::vector<int64_t> prompt(static_cast<size_t>(a.prompt_tokens));
  for (int64_t& id : prompt) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.vocab_size));
  const std::vector<int> thread_counts = thread_counts_or_all(a.threads);
  const double bytes = bytes_per_token(model, a.prompt_tokens, a.new_tokens);
  if (!a.json) {
    std::printf("attn bench generate: %s, %lld parameters, prompt %lld tokens, then %lld\n",
                a.model.empty() ? ("random " + a.shape).c_str() : a.model.c_str(),
                static_cast<long long>(model.num_parameters()),
                static_cast<long long>(a.prompt_tokens), static_cast<long long>(a.new_tokens));
    std::printf(
        "a generated token reads %.1f MB (%s weights + f32 K/V); the read bandwidth is\n"
        "measured before each run, and %%limit is the median of the runs' limit / time\n",
        bytes / 1e6, a.weights.c_str());
    std::printf("\n%7s %14s %10s %10s %12s %8s\n", "threads", "prompt tok/s", "ms/token", "GB/s",
                "limit ms/tok", "%limit");
  }
  for (int threads : thread_counts) {
    set_num_threads(threads);
    const auto warm_up = static_cast<std::ptrdiff_t>(std::min<int64_t>(8, a.prompt_tokens));
    time_once(model, std::vector<int64_t>(prompt.begin(), prompt.begin() + warm_up), 8);
    // This machine's bandwidth moves with its neighbours' load: each run is set against the
    // bandwidth measured just before it.
    std::vector<double> prompt_ms, token_ms, gbps, fraction;
    for (int r = 0; r < a.runs; ++r) {
      gbps.push_back(measure_read_bandwidth_gbps(threads));
      set_num_threads(threads);
      const Timing t = time_once(model, prompt, a.new_tokens);
      prompt_ms.push_back(t.prompt_ms);
      token_ms.push_back(t.token_ms);
      fraction.push_back(bytes / (gbps.back() * 1e6) / t.token_ms);
    }
    const double p_ms = median(prompt_ms), t_ms = median(token_ms), bandwidth = median(gbps);
    const double limit_ms = bytes / (bandwidth * 1e6);
    const double prompt_rate = 1e3 * static_cast<double>(a.prompt_tokens) / p_ms;
    if (a.json) {
      std::printf(
          "{\"model\": \"%s\", \"weights\": \"%s\", \"parameters\": %lld, \"prompt_tokens\": %lld, "
          "\"new_tokens\": "
          "%lld, \"threads\": %d, \"prompt_tokens_per_s\": %.1f, \"ms_per_token\": %.3f, "
          "\"bytes_per_token\": %.0f, \"bandwidth_gbps\": %.2f, \"limit_ms_per_token\": %.3f, "
          "\"fraction_of_limit\": %.3f}\n",
          a.model.empty() ? a.shape.c_str() : a.model.c_str(), a.weights.c_str(),
          static_cast<long long>(model.num_parameters()), static_cast<long long>(a.prompt_tokens),
          static_cast<long long>(a.new_tokens), threads, prompt_rate, t_ms, bytes, bandwidth,
          limit_ms, median(fraction));
    } else {
      std::printf("%7d %14.1f %10.2f %10.1f %12.2f %7.0f%%\n", threads, prompt_rate, t_ms,
                  bandwidth, limit_ms, 100.0 * median(fraction));
    }
    std::fflush(stdout);
  }
  set_num_threads(0);
}

}  // namespace

void add_bench_generate_command(CLI::App& bench) {
  auto a = std::make_shared<GenerateBenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "generate",
      "Time a GPT-2 model: prompt processing (tokens/s, one pass through the KV cache) and\n"
      "generation one greedy token at a time after it (median ms/token over --runs), next to\n"
      "the limit of memory bandwidth measured in the same run: every weight and the cached K/V\n"
      "are read once per token. The model: --model DIR (Hugging Face's layout) or random\n"
      "weights in a GPT-2 shape.");
  cmd->add_option("--model", a->model, "a GPT-2 model directory (config.json, model.safetensors)")
      ->type_name("DIR");
  cmd->add_option("--shape", a->shape, "without --model: gpt2, gpt2-medium, gpt2-large, gpt2-xl")
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "prompt length (random ids)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--new-tokens", a->new_tokens, "tokens generated after the prompt")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--weights", a->weights,
                  "f32, or bf16: the matrices kept in bfloat16 (half the bytes per token)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "thread counts, e.g. --threads 1,2 (default: 1 and all)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--runs", a->runs, "timed runs (median reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "one JSON object per line");
  cmd->callback([a] { run_generate_bench(*a); });
}

}  // namespace attn::cli
