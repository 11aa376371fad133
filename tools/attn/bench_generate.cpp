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
#include "attn/gpt_flops.hpp"
#include "attn/hf.hpp"
#include "attn/kv_cache.hpp"
#include "attn/phase_clock.hpp"
#include "attn/threads.hpp"
#include "bench_util.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "hot/bandwidth.hpp"
#include "hot/fma_peak.hpp"
#include "phase_table.hpp"

namespace attn::cli {
namespace {

struct GenerateBenchArgs {
  std::string model, shape = "gpt2", weights = "f32", cache_dtype = "f32";
  int64_t prompt_tokens = 512, new_tokens = 256;
  std::vector<int> threads;
  int runs = 3;
  bool json = false, profile = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Bytes a token reads when `cached` positions are in the cache (a mean over tokens may be
// fractional): every weight once, as held (wte twice: a row for the embedding, all of it for
// the logits; wpe, always float, one row), and K and V of every cached position in every layer,
// as the cache stores them (a q8 row: its int8 values and a bfloat16 scale).
double bytes_per_token(const Gpt& model, double cached, Dtype cache_dtype) {
  const GptConfig& c = model.config();
  const double wpe = static_cast<double>(c.block_size * c.n_embd);
  const double weights =
      static_cast<double>(model.weight_bytes()) - 4.0 * wpe + 4.0 * static_cast<double>(c.n_embd);
  const int64_t kv_heads = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
  const double row = static_cast<double>(KVCache::row_bytes(cache_dtype, c.n_embd / c.n_head));
  return weights + 2.0 * row * static_cast<double>(c.n_layer * kv_heads) * cached;
}

struct Run {
  double prompt_ms = 0, token_ms = 0;  // the prompt; the mean of the generated tokens
  std::vector<double> gbps, fraction;  // per generated token: the probe beside it, limit / time
};

// The prompt through the cache, then new_tokens greedy tokens one at a time (the argmax of the
// last logits, as generate() at temperature 0 does). Before each token the probe reads as many
// bytes as a token does: each token is set against the bandwidth of its own moment (the
// neighbours of these VMs move it by tens of percent within seconds), in the same cache state
// (each follows a stream of its own size that evicted the other's bytes).
Run time_once(const Gpt& model, const std::vector<int64_t>& prompt, int64_t new_tokens,
              Dtype cache_dtype, ReadBandwidthProbe* probe, bool profile_prompt) {
  GptCache cache = model.make_cache(1, cache_dtype);
  const int64_t vocab = model.config().vocab_size;
  std::mt19937_64 rng(0);
  const SamplingOptions greedy{0.0f, 0, 1.0f};
  Run run;
  set_phase_clock(profile_prompt);
  auto start = std::chrono::steady_clock::now();
  Tensor logits = model.decode(prompt, 1, cache, LogitRows::kLast);
  run.prompt_ms = ms_since(start);
  set_phase_clock(false);
  for (int64_t i = 0; i < new_tokens; ++i) {
    const double gbps = probe ? probe->pass_gbps() : 0.0;  // on this run's threads too
    start = std::chrono::steady_clock::now();
    const std::span<const float> last(logits.data() + (logits.dim(1) - 1) * vocab,
                                      static_cast<size_t>(vocab));
    const int64_t next[] = {sample_token(last, greedy, rng)};
    logits = model.decode(next, 1, cache);
    const double ms = ms_since(start);
    run.token_ms += ms / static_cast<double>(new_tokens);
    if (probe) {
      run.gbps.push_back(gbps);
      const double bytes =
          bytes_per_token(model, static_cast<double>(cache.position()), cache_dtype);
      run.fraction.push_back(bytes / (gbps * 1e6) / ms);
    }
  }
  return run;
}

double mean(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// --profile: the prompt's time per phase, summed over the timed runs (the phase clock ran
// around each run's prompt only), as a table or, with --json, one more object.
void print_prompt_profile(const GptConfig& c, const GenerateBenchArgs& a, int threads,
                          double prompt_ms, double peak_gflops) {
  const PhaseTotals totals = phase_totals();
  const auto t = static_cast<double>(a.prompt_tokens);
  const PassFlops flops{prompt_matmul_flops(c, t), prompt_attention_flops(c, t)};
  const double runs = static_cast<double>(a.runs);
  if (a.json) {
    std::printf("{\"profile\": \"prompt\", \"threads\": %d, \"prompt_ms\": %.3f", threads,
                prompt_ms);
    for (int i = 0; i < kPhaseCount; ++i) {
      if (totals.calls[static_cast<size_t>(i)] == 0) continue;
      std::printf(", \"%s_ms\": %.3f", phase_name(static_cast<Phase>(i)),
                  1e3 * totals.seconds[static_cast<size_t>(i)] / runs);
    }
    std::printf(", \"matmul_flop\": %.0f, \"attention_flop\": %.0f}\n", flops.matmul,
                flops.attention);
    return;
  }
  std::printf("  the prompt on %d thread(s), mean of %d runs:\n", threads, a.runs);
  print_phase_table(totals, runs, prompt_ms, flops, peak_gflops, "prompt");
}

void run_generate_bench(const GenerateBenchArgs& a) {
  ATTN_CHECK(a.prompt_tokens >= 1, "--prompt-tokens must be >= 1");
  // The lengths are checked against the config before the model is built.
  const GptConfig c = a.model.empty() ? gpt2_shape(a.shape) : gpt2_config_from_hf_dir(a.model);
  ATTN_CHECK(a.prompt_tokens + a.new_tokens <= c.block_size, "--prompt-tokens + --new-tokens (",
             a.prompt_tokens + a.new_tokens, ") exceed the model's ", c.block_size, " positions");
  // The parameters and the file's tensors (4 + 4 bytes a parameter), the KV cache, and the
  // probe: a token's bytes (float weights and K/V at most) and 512 MiB more.
  const double kv_bytes = 8.0 * static_cast<double>(c.n_layer * c.n_embd * c.block_size);
  check_memory(a.model.empty() ? "--shape " + a.shape : a.model,
               12.0 * static_cast<double>(parameter_count(c)) + 2.0 * kv_bytes +
                   static_cast<double>(kProbeExtraBytes));
  Gpt model = a.model.empty() ? Gpt(c, 1) : gpt_from_hf(a.model);
  model.set_weights_dtype(weights_dtype_from_string(a.weights));
  std::mt19937_64 rng(7);
  std::vector<int64_t> prompt(static_cast<size_t>(a.prompt_tokens));
  for (int64_t& id : prompt) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.vocab_size));
  const std::vector<int> thread_counts = thread_counts_or_all(a.threads);
  const Dtype cache_dtype = dtype_from_string(a.cache_dtype, "--cache-dtype");
  // The mean over the generated tokens: token i sees prompt + i + 1 positions.
  const double bytes = bytes_per_token(
      model, static_cast<double>(a.prompt_tokens) + (static_cast<double>(a.new_tokens) + 1) / 2,
      cache_dtype);
  const double flops = prompt_flops(c, static_cast<double>(a.prompt_tokens));
  if (!a.json) {
    std::printf("attn bench generate: %s, %lld parameters, prompt %lld tokens, then %lld\n",
                a.model.empty() ? ("random " + a.shape).c_str() : a.model.c_str(),
                static_cast<long long>(model.num_parameters()),
                static_cast<long long>(a.prompt_tokens), static_cast<long long>(a.new_tokens));
    std::printf(
        "the prompt is %.1f GFLOP (products and attention); %%peak is its rate over the FMA\n"
        "peak measured on as many threads. A generated token reads %.1f MB (%s weights +\n"
        "%s K/V). Before each token a probe reads as many bytes: GB/s is its median, %%limit\n"
        "the median over the tokens of (bytes / the probe's bandwidth) / the token's time;\n"
        "%%best sets the mean token against the best of four 512 MiB passes measured once (the\n"
        "older, more flattering figure)\n",
        flops / 1e9, bytes / 1e6, a.weights.c_str(), a.cache_dtype.c_str());
    std::printf("\n%7s %14s %7s %10s %10s %12s %8s %8s\n", "threads", "prompt tok/s", "%peak",
                "ms/token", "GB/s", "limit ms/tok", "%limit", "%best");
  }
  for (int threads : thread_counts) {
    set_num_threads(threads);
    const auto warm_up = static_cast<std::ptrdiff_t>(std::min<int64_t>(8, a.prompt_tokens));
    time_once(model, std::vector<int64_t>(prompt.begin(), prompt.begin() + warm_up), 8, cache_dtype,
              nullptr, false);
    const double best_gbps = a.new_tokens > 0 ? measure_read_bandwidth_gbps(threads) : 0.0;
    const double peak_gflops = measure_fma_peak_gflops(threads);
    ReadBandwidthProbe probe(a.new_tokens > 0 ? static_cast<int64_t>(bytes) : 0, threads);
    std::vector<double> prompt_ms, token_ms, gbps, fraction;
    reset_phase_totals();
    for (int r = 0; r < a.runs; ++r) {
      set_num_threads(threads);
      const Run run = time_once(model, prompt, a.new_tokens, cache_dtype,
                                a.new_tokens > 0 ? &probe : nullptr, a.profile);
      prompt_ms.push_back(run.prompt_ms);
      token_ms.push_back(run.token_ms);
      gbps.insert(gbps.end(), run.gbps.begin(), run.gbps.end());
      fraction.insert(fraction.end(), run.fraction.begin(), run.fraction.end());
    }
    const double p_ms = median(prompt_ms), t_ms = median(token_ms);
    const double bandwidth = gbps.empty() ? 0.0 : median(gbps);
    const double limit_ms = bandwidth > 0 ? bytes / (bandwidth * 1e6) : 0.0;
    const double of_limit = fraction.empty() ? 0.0 : median(fraction);
    const double of_best = best_gbps > 0 ? bytes / (best_gbps * 1e6) / t_ms : 0.0;
    const double prompt_rate = 1e3 * static_cast<double>(a.prompt_tokens) / p_ms;
    const double prompt_gflops = flops / (p_ms * 1e6), of_peak = prompt_gflops / peak_gflops;
    if (a.json) {
      std::printf(
          "{\"model\": \"%s\", \"weights\": \"%s\", \"cache_dtype\": \"%s\", \"parameters\": %lld, "
          "\"prompt_tokens\": %lld, "
          "\"new_tokens\": %lld, \"threads\": %d, \"prompt_tokens_per_s\": %.1f, "
          "\"prompt_flop\": %.0f, \"prompt_gflops\": %.1f, \"fma_peak_gflops\": %.1f, "
          "\"prompt_fraction_of_peak\": %.4g, "
          "\"ms_per_token\": %.3f, \"bytes_per_token\": %.0f, \"bandwidth_gbps\": %.2f, "
          "\"limit_ms_per_token\": %.3f, \"fraction_of_limit\": %.3f, "
          "\"best_bandwidth_gbps\": %.2f, \"fraction_of_best\": %.3f}\n",
          a.model.empty() ? a.shape.c_str() : a.model.c_str(), a.weights.c_str(),
          a.cache_dtype.c_str(), static_cast<long long>(model.num_parameters()),
          static_cast<long long>(a.prompt_tokens), static_cast<long long>(a.new_tokens), threads,
          prompt_rate, flops, prompt_gflops, peak_gflops, of_peak, t_ms, bytes, bandwidth, limit_ms,
          of_limit, best_gbps, of_best);
    } else {
      std::printf("%7d %14.1f %6.0f%% %10.2f %10.1f %12.2f %7.0f%% %7.0f%%\n", threads, prompt_rate,
                  100.0 * of_peak, t_ms, bandwidth, limit_ms, 100.0 * of_limit, 100.0 * of_best);
    }
    if (a.profile) print_prompt_profile(c, a, threads, mean(prompt_ms), peak_gflops);
    std::fflush(stdout);
  }
  set_num_threads(0);
}

}  // namespace

void add_bench_generate_command(CLI::App& bench) {
  auto a = std::make_shared<GenerateBenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "generate",
      "Time a GPT-2 model: prompt processing (tokens/s, one pass through the KV cache, and its\n"
      "share of the FMA peak measured in the run) and generation one greedy token at a time\n"
      "after it (median ms/token over --runs), next to the limit of memory bandwidth: every\n"
      "weight and the cached K/V are read once per token, and before each token a probe reads\n"
      "as many bytes, so each token is set against the bandwidth of its own moment. The model:\n"
      "--model DIR (Hugging Face's layout) or random weights in a GPT-2 shape.");
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
  cmd->add_option("--cache-dtype", a->cache_dtype,
                  "the KV cache's storage: f32, bf16 or q8 (int8 rows with a bfloat16 scale each)")
      ->check(CLI::IsMember({"f32", "bf16", "q8"}))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "thread counts, e.g. --threads 1,2 (default: 1 and all)")
      ->delimiter(',')
      ->check(in_range(1, kMaxThreads));
  cmd->add_option("--runs", a->runs, "timed runs (median reported)")
      ->check(in_range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "one JSON object per line");
  cmd->add_flag("--profile", a->profile,
                "after each thread count's row, the prompt's time per phase (matrix products, "
                "attention, LayerNorm, GELU, …) with GFLOP/s and the share of the FMA peak");
  cmd->callback([a] { run_generate_bench(*a); });
}

}  // namespace attn::cli
