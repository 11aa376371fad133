// What the benchmarks share: the median of timed runs, peak memory, a competing process, and
// the default thread counts. A benchmark reports a ratio against a baseline measured in the
// same run, because this machine is shared and noisy.
#pragma once

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attn/sdpa.hpp"

namespace attn::cli {

// The flags `attn bench forward` and `attn bench backward` share.
struct AttentionBenchArgs {
  std::vector<int64_t> seq{1024};
  int64_t batch = 1, heads = 16, kv_heads = 0, head_dim = 64;
  bool causal = false, json = false, compete = false, block = false;
  std::vector<int> threads;
  std::string impl = "fused";
  int runs = 5;
  int64_t reference_max_seq = 1024;
  std::string variant = "none";   // none, softcap, alibi, sinks, bias, bias-grad(-kept): below
  int64_t packed = 1;             // > 1: that many sequences of mixed lengths per --seq (varlen)
  std::string precision = "f32";  // the products' operands: f32 or bf16
};
void add_attention_bench_options(CLI::App& command, AttentionBenchArgs& args);
// --variant's SdpaOptions for sequences of t_len: softcap 50 (Gemma 2's attention cap), ALiBi
// with BLOOM's slopes 2^(−8(h+1)/H), one sink per head drawn from N(0, 1), or an additive
// (H, T, T) bias (a learned relative-position bias, T5's shape), whose gradient the backward
// also returns with "bias-grad" (a new tensor per call) and "bias-grad-kept" (into one buffer
// the bench keeps, as a training loop would); "none" leaves options alone.
void apply_bench_variant(const AttentionBenchArgs& args, int64_t t_len, SdpaOptions& options);
// --packed N's sequence lengths for a total of t_len: proportional to 1, 2, …, N (the last
// takes what rounding leaves), e.g. 113, 227, …, 914 for N = 8 and 4096.
std::vector<int64_t> packed_lengths(int64_t t_len, int64_t sequences);
// Their offsets (cu_seqlens: 0, then each sequence's end) for --packed; attn::Error unless
// --batch is 1.
std::vector<int64_t> packed_offsets(const AttentionBenchArgs& args, int64_t t_len);
// A (1, H, T, d) tensor's rows packed as sdpa_varlen takes them: (T, H, d), contiguous.
Tensor packed_rows(const Tensor& x);

// The FLOPs of `products` T×T×d matrix products (2 in the forward, 5 in the backward) over
// every sequence of a --seq: one of t_len per batch entry, or --packed's lengths. `square`
// counts each sequence's full square, `useful` only its causal part when causal.
struct AttentionFlops {
  double square, useful;
};
AttentionFlops attention_flops(const AttentionBenchArgs& args, int64_t t_len, int products);

// The header line's words for --variant ("" for none).
std::string bench_variant_words(const AttentionBenchArgs& args);
// --kv-heads, or --heads when it is not given; checked to divide --heads.
int64_t resolved_kv_heads(const AttentionBenchArgs& args);
// attn::Error before any measurement when the longest --seq's arrays (`copies` of Q, K, V and
// O: 1 forward, 2 with the gradients) would not fit in memory.
void check_bench_memory(const AttentionBenchArgs& args, int64_t kv_heads, double copies);

// One measured row of `attn bench forward` or `backward`.
struct AttentionBenchRow {
  int64_t seq, kv_heads;
  int threads;
  double ms, gflops, useful_gflops, peak_gflops;
  double reference_ms;  // < 0: not measured
  double rss_mib;
};
// The JSON fields both benches print, comma-separated, without braces: each bench adds its own.
// Times and rates keep six significant digits (a ratio of two tiny rates, under a sanitizer,
// lost its third digit to two decimals).
std::string attention_json_fields(const AttentionBenchArgs& args, const AttentionBenchRow& row);

// Milliseconds of one call of fn.
template <typename Fn>
double ms_of_call(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The median of times (at least one).
inline double median_of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of `runs` calls of fn, timed one by one, without a warm-up.
template <typename Fn>
double timed_median_ms(int runs, Fn&& fn) {
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) ms.push_back(ms_of_call(fn));
  return median_of(std::move(ms));
}

// Calls fn for at least 200 ms (at least once): page faults, pool start, caches, and the clock
// of a core that was idle — on this VM a fresh process's first ~50 ms ran up to 1.5× slower,
// which a single warm-up call of a short kernel did not cover.
template <typename Fn>
void warm_up(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  do {
    fn();
  } while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200));
}

// Median milliseconds of `runs` calls of fn, after warm_up.
template <typename Fn>
double median_ms(int runs, Fn&& fn) {
  warm_up(fn);
  return timed_median_ms(runs, fn);
}

// Median milliseconds of each of fns over `runs` rounds, a round calling each once in turn,
// after warming all of them up (warm_up, the whole round): calls that take turns meet the same
// moments of a shared host (a neighbour's memory traffic comes and goes in seconds), so the ratio
// of two medians is one of like for like, where a block of runs each would be timed minutes apart.
std::vector<double> interleaved_median_ms(int runs, const std::vector<std::function<void()>>& fns);

// The process's peak resident memory so far, MiB.
double peak_rss_mib();

// The given thread counts, or {all cores} when none were given.
std::vector<int> thread_counts_or_all(const std::vector<int>& given);

// A child process that keeps one core busy until this object goes away: the "shared machine"
// case in which spinning thread pools collapse.
class CompetingProcess {
 public:
  explicit CompetingProcess(bool start);
  ~CompetingProcess();
  CompetingProcess(const CompetingProcess&) = delete;
  CompetingProcess& operator=(const CompetingProcess&) = delete;

 private:
  pid_t pid_ = -1;
};

}  // namespace attn::cli
