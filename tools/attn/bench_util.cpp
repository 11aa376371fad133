#include "bench_util.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "attn/error.hpp"
#include "attn/random.hpp"
#include "attn/simd.hpp"
#include "attn/threads.hpp"
#include "common.hpp"

namespace attn::cli {

void add_attention_bench_options(CLI::App& command, AttentionBenchArgs& a) {
  command.add_option("--seq", a.seq, "sequence lengths, e.g. --seq 256,1024,4096")
      ->delimiter(',')
      ->capture_default_str()
      ->check(positive());
  command.add_option("--batch", a.batch, "batch size")->capture_default_str()->check(positive());
  command.add_option("--heads", a.heads, "query heads")->capture_default_str()->check(positive());
  command.add_option("--kv-heads", a.kv_heads, "key/value heads (GQA; default = --heads)")
      ->check(positive());
  command.add_option("--head-dim", a.head_dim, "head width d")
      ->capture_default_str()
      ->check(positive());
  command.add_flag("--causal", a.causal, "causal self-attention");
  command
      .add_option("--threads", a.threads, "thread counts, e.g. --threads 1,2 (default: all cores)")
      ->delimiter(',')
      ->check(in_range(1, kMaxThreads));
  add_impl_option(command, a.impl);
  command.add_option("--runs", a.runs, "timed runs (median reported)")
      ->capture_default_str()
      ->check(in_range(1, 1000));
  command
      .add_option("--reference-max-seq", a.reference_max_seq,
                  "time the reference path only up to this length (it is slow)")
      ->capture_default_str();
  command.add_flag("--block", a.block,
                   "time the whole multi-head block (x·[Wq|Wk|Wv], attention, ·Wo; d_model = H·d); "
                   "its GFLOP/s add the projections' FLOPs");
  command.add_flag("--compete", a.compete, "keep one core busy with another process meanwhile");
  command.add_flag("--json", a.json, "one JSON object per line");
  command
      .add_option("--packed", a.packed,
                  "each --seq as that many packed sequences of mixed lengths (sdpa_varlen and its "
                  "backward; GFLOP/s count each sequence's own square)")
      ->check(in_range(1, 4096))
      ->excludes("--block");
  command
      .add_option("--variant", a.variant,
                  "a score variant on every call: softcap (c = 50), alibi (BLOOM's slopes), "
                  "sinks (one per head), bias (an additive (H, T, T) mask), bias-grad (the "
                  "same, its gradient returned by the backward in a new tensor) or "
                  "bias-grad-kept (into one buffer kept across calls)")
      ->capture_default_str()
      ->check(CLI::IsMember(
          {"none", "softcap", "alibi", "sinks", "bias", "bias-grad", "bias-grad-kept"}))
      ->excludes("--block");
  command
      .add_option("--precision", a.precision,
                  "the products' operands: f32, or bf16 (rounded to bfloat16 for them; on AMX "
                  "tiles where the CPU has them, else on AVX-512 BF16's vdpbf16ps on AMD's CPUs; "
                  "ATTN_SIMD=avx512 to time the float kernels instead)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->excludes("--block");
}

std::vector<int64_t> packed_lengths(int64_t t_len, int64_t sequences) {
  const int64_t weights = sequences * (sequences + 1) / 2;
  std::vector<int64_t> lengths;
  int64_t used = 0;
  for (int64_t s = 1; s < sequences; ++s) {
    lengths.push_back(t_len * s / weights);
    used += lengths.back();
  }
  lengths.push_back(t_len - used);
  return lengths;
}

std::vector<int64_t> packed_offsets(const AttentionBenchArgs& a, int64_t t_len) {
  ATTN_CHECK(a.batch == 1, "--packed needs --batch 1");
  std::vector<int64_t> offsets{0};
  for (int64_t length : packed_lengths(t_len, a.packed)) offsets.push_back(offsets.back() + length);
  return offsets;
}

Tensor packed_rows(const Tensor& x) { return x.select(0).permute({1, 0, 2}).contiguous(); }

AttentionFlops attention_flops(const AttentionBenchArgs& a, int64_t t_len, int products) {
  const std::vector<int64_t> lengths =
      a.packed > 1 ? packed_lengths(t_len, a.packed) : std::vector<int64_t>(a.batch, t_len);
  AttentionFlops flops{0.0, 0.0};
  for (int64_t length : lengths) {
    const double l = double(length), per_score = 2.0 * products * a.heads * a.head_dim;
    flops.square += per_score * l * l;
    flops.useful += a.causal ? per_score * l * (l + 1) / 2 : per_score * l * l;
  }
  return flops;
}

void apply_bench_variant(const AttentionBenchArgs& a, int64_t t_len, SdpaOptions& options) {
  if (a.variant.rfind("bias", 0) == 0) {
    options.mask = Mask::additive(rand_normal({a.heads, t_len, t_len}, 7));
    options.return_mask_gradient = a.variant != "bias";
  }
  if (a.variant == "softcap") options.softcap = 50.0f;
  for (int64_t h = 0; a.variant == "alibi" && h < a.heads; ++h) {
    options.alibi_slopes.push_back(std::exp2(-8.0f * static_cast<float>(h + 1) / a.heads));
  }
  if (a.variant == "sinks") options.sinks = rand_normal({a.heads}, 6).to_vector();
  options.precision = float_dtype_from_string(a.precision, "--precision");
}

// Where the fused kernels' bf16 products run on this CPU now, in words.
std::string bf16_engine_words() {
  const std::string engine = bf16_attention_engine();
  if (engine == "amx") return "AMX tiles";
  if (engine == "vdpbf16ps") return "vdpbf16ps";
  return "the float kernels (rounded values)";
}

std::string bench_variant_words(const AttentionBenchArgs& a) {
  std::string words;
  if (a.variant == "softcap") words = ", soft-capped at 50";
  if (a.variant == "alibi") words = ", ALiBi";
  if (a.variant == "sinks") words = ", a sink per head";
  if (a.variant == "bias") words = ", an additive (H, T, T) bias";
  if (a.variant == "bias-grad") words = ", an additive (H, T, T) bias and its gradient";
  if (a.variant == "bias-grad-kept")
    words = ", an additive (H, T, T) bias and its gradient into a kept buffer";
  if (a.precision == "bf16") words += ", bf16 products on " + bf16_engine_words();
  return words;
}

void check_bench_memory(const AttentionBenchArgs& a, int64_t kv_heads, double copies) {
  int64_t longest = 0;
  for (int64_t t : a.seq) longest = std::max(longest, t);
  // Q and O of every head, K and V of the K/V heads (the --block inputs are no larger).
  const double floats = double(a.batch) * double(longest) * double(a.head_dim) *
                        (2.0 * double(a.heads) + 2.0 * double(kv_heads));
  check_memory("--seq " + std::to_string(longest), copies * floats * sizeof(float));
}

int64_t resolved_kv_heads(const AttentionBenchArgs& a) {
  const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  ATTN_CHECK(a.heads % kv_heads == 0, "--kv-heads (", kv_heads, ") must divide --heads (", a.heads,
             ")");
  return kv_heads;
}

std::string attention_json_fields(const AttentionBenchArgs& a, const AttentionBenchRow& r) {
  char fields[1024];
  std::snprintf(
      fields, sizeof(fields),
      "\"seq\": %lld, \"batch\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, "
      "\"causal\": %s, \"threads\": %d, \"impl\": \"%s\", \"ms\": %.6g, \"gflops\": %.6g, "
      "\"useful_gflops\": %.6g, \"peak_gflops\": %.6g, \"reference_ms\": %s, "
      "\"block\": %s, \"compete\": %s, \"rss_mib\": %.1f, \"simd\": \"%s\", "
      "\"variant\": \"%s\", \"packed\": %lld, \"precision\": \"%s\", \"bf16_engine\": \"%s\"",
      static_cast<long long>(r.seq), static_cast<long long>(a.batch),
      static_cast<long long>(a.heads), static_cast<long long>(r.kv_heads),
      static_cast<long long>(a.head_dim), a.causal ? "true" : "false", r.threads, a.impl.c_str(),
      r.ms, r.gflops, r.useful_gflops, r.peak_gflops,
      r.reference_ms < 0 ? "null" : std::to_string(r.reference_ms).c_str(),
      a.block ? "true" : "false", a.compete ? "true" : "false", r.rss_mib, simd_target().c_str(),
      a.variant.c_str(), static_cast<long long>(a.packed), a.precision.c_str(),
      bf16_attention_engine().c_str());
  return fields;
}

std::vector<double> interleaved_median_ms(int runs, const std::vector<std::function<void()>>& fns) {
  warm_up([&] {
    for (const auto& fn : fns) fn();
  });
  std::vector<std::vector<double>> ms(fns.size());
  for (int r = 0; r < runs; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) ms[i].push_back(ms_of_call(fns[i]));
  }
  std::vector<double> medians;
  for (std::vector<double>& each : ms) medians.push_back(median_of(std::move(each)));
  return medians;
}

double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::vector<int> thread_counts_or_all(const std::vector<int>& given) {
  if (!given.empty()) return given;
  return {static_cast<int>(std::thread::hardware_concurrency())};
}

CompetingProcess::CompetingProcess(bool start) {
  if (!start) return;
  pid_ = ::fork();
  ATTN_CHECK(pid_ >= 0, "bench: cannot start the competing process");
  if (pid_ == 0) {
    volatile uint64_t spin = 0;
    for (;;) spin = spin + 1;
  }
}

CompetingProcess::~CompetingProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

}  // namespace attn::cli
