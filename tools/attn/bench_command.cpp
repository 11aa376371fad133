// attn bench forward: times the attention forward on self-attention shapes and reports
// milliseconds, GFLOP/s, the fraction of the FMA peak measured in the same run, and the
// speed-up over the reference path in the same run. A benchmark, not a test: the numbers
// depend on the machine and on what else runs on it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_varlen.hpp"
#include "attn/simd.hpp"
#include "attn/threads.hpp"
#include "bench_util.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "hot/bandwidth.hpp"
#include "hot/fma_peak.hpp"
#include "mpi_run.hpp"

namespace attn::cli {
namespace {

void run_forward(const AttentionBenchArgs& a) {
  const int64_t kv_heads = resolved_kv_heads(a);
  check_bench_memory(a, kv_heads, 1);
  const std::vector<int> thread_counts = thread_counts_or_all(a.threads);
  CompetingProcess competitor(a.compete);
  std::map<int, double> peak;
  for (int t : thread_counts) peak[t] = measure_fma_peak_gflops(t);
  if (!a.json) {
    std::printf("attn bench forward: B=%lld H=%lld Hkv=%lld d=%lld %s%s, %s path%s\n",
                static_cast<long long>(a.batch), static_cast<long long>(a.heads),
                static_cast<long long>(kv_heads), static_cast<long long>(a.head_dim),
                a.causal ? "causal" : "non-causal", bench_variant_words(a).c_str(), a.impl.c_str(),
                a.compete ? ", another process keeping one core busy" : "");
    for (int t : thread_counts)
      std::printf("measured FMA peak, %d thread(s), %s: %.0f GFLOP/s\n", t, simd_target().c_str(),
                  peak[t]);
    std::printf(
        "GFLOP/s counts 4·B·H·T²·d (the full square, causal too); useful counts "
        "2·B·H·T·(T+1)·d when causal\n\n");
    std::printf("%7s %7s %10s %9s %9s %7s %10s %9s\n", "seq", "threads", "ms", "GFLOP/s", "useful",
                "%peak", "vs ref", "rss MiB");
  }
  for (int64_t t_len : a.seq) {
    ATTN_CHECK(t_len >= 1, "--seq must be >= 1, got ", t_len);
    const Tensor q = rand_normal({a.batch, a.heads, t_len, a.head_dim}, 1);
    const Tensor k = rand_normal({a.batch, kv_heads, t_len, a.head_dim}, 2);
    const Tensor v = rand_normal({a.batch, kv_heads, t_len, a.head_dim}, 3);
    SdpaOptions options;
    options.causal = a.causal;
    apply_bench_variant(a, t_len, options);
    const AttentionFlops attention = attention_flops(a, t_len, 2);
    double square = attention.square, useful = attention.useful;
    // --block: the whole multi-head block on x (B, T, H·d), weights (H·d, H·d) each.
    const int64_t d_model = a.heads * a.head_dim;
    Tensor x, w;
    if (a.block) {
      x = rand_normal({a.batch, t_len, d_model}, 4);
      w = rand_normal({d_model, d_model}, 5, 0.0f, 1.0f / std::sqrt(static_cast<float>(d_model)));
      const double projections =
          2.0 * a.batch * double(t_len) * d_model * d_model * 4;  // Q, K, V, O
      square += projections;
      useful += projections;
    }
    // --packed: the same rows as sequences of mixed lengths, (T, H, d) packed, each attending
    // within itself; the FLOPs are the sequences' own.
    std::vector<int64_t> cu;
    Tensor q_packed, k_packed, v_packed;
    if (a.packed > 1) {
      cu = packed_offsets(a, t_len);
      q_packed = packed_rows(q);
      k_packed = packed_rows(k);
      v_packed = packed_rows(v);
    }
    auto run_once = [&](const std::string& impl) {
      if (a.block) {
        mha_with(impl, x, w, w, w, w, a.heads, options);
      } else if (a.packed > 1) {
        sdpa_varlen(q_packed, k_packed, v_packed, cu, cu, options);
      } else {
        sdpa_with(impl, q, k, v, options);
      }
    };
    for (int threads : thread_counts) {
      set_num_threads(threads);
      const double ms = median_ms(a.runs, [&] { run_once(a.impl); });
      double reference_ms = -1.0;  // not measured
      if (a.impl == "fused" && a.packed == 1 && t_len <= a.reference_max_seq) {
        reference_ms = median_ms(1, [&] { run_once("reference"); });
      }
      const double gflops = square / ms / 1e6, useful_gflops = useful / ms / 1e6;
      const double rss = peak_rss_mib();
      if (a.json) {
        const AttentionBenchRow row{t_len,         kv_heads,      threads,      ms, gflops,
                                    useful_gflops, peak[threads], reference_ms, rss};
        std::printf("{%s}\n", attention_json_fields(a, row).c_str());
      } else {
        const std::string vs_ref =
            reference_ms < 0 ? "-" : detail::concat(int(reference_ms / ms), "x");
        std::printf("%7lld %7d %10.2f %9.1f %9.1f %6.0f%% %10s %9.0f\n",
                    static_cast<long long>(t_len), threads, ms, gflops, useful_gflops,
                    100.0 * useful_gflops / peak[threads], vs_ref.c_str(), rss);
      }
      std::fflush(stdout);
    }
  }
  set_num_threads(0);
}

struct DecodeArgs {
  std::vector<int64_t> cache{1024, 4096, 16384, 65536, 262144};
  int64_t heads = 16, kv_heads = 0, head_dim = 64;
  std::vector<std::string> dtypes{"f32"};
  std::vector<int> threads;
  int runs = 20;
  bool json = false, compete = false;
};

// One decode step: a single new query per head against a cache of L positions, the attention
// alone (the new token's K/V already appended). Bytes read: K and V of every cached position,
// as stored (a q8 row: d bytes and its 2-byte scale). The storages in --cache-dtype are held
// side by side for each length and their steps take turns, run after run, so each speed-up is
// a ratio of medians timed through the same moments of the host (interleaved_median_ms). The
// read-bandwidth probe takes its turn among them (a pass over as many bytes as the largest
// cache, from memory), so each fraction of the bandwidth is of the same moments too (measured
// once before the steps, it set one moment of a shared host against a median of later ones).
void run_decode(const DecodeArgs& a) {
  const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  ATTN_CHECK(a.heads % kv_heads == 0, "--kv-heads (", kv_heads, ") must divide --heads (", a.heads,
             ")");
  std::vector<Dtype> storages;
  for (const std::string& name : a.dtypes)
    storages.push_back(dtype_from_string(name, "--cache-dtype"));
  auto cache_bytes = [&](Dtype storage, int64_t length) {
    return 2.0 * double(kv_heads) * double(length) *
           double(KVCache::row_bytes(storage, a.head_dim));
  };
  // The bandwidth probe of a length reads as many bytes as its largest cache.
  auto probe_bytes = [&](int64_t length) {
    double most = 0.0;
    for (Dtype storage : storages) most = std::max(most, cache_bytes(storage, length));
    return most;
  };
  const int64_t longest = *std::max_element(a.cache.begin(), a.cache.end());
  double largest = 0.0;  // one length's caches exist at a time, every storage's, and its probe
  for (Dtype storage : storages) largest += cache_bytes(storage, longest);
  check_memory("--cache " + std::to_string(longest),
               largest + probe_bytes(longest) + static_cast<double>(kProbeExtraBytes));
  const std::vector<int> thread_counts = thread_counts_or_all(a.threads);
  CompetingProcess competitor(a.compete);
  if (!a.json) {
    std::printf(
        "attn bench decode: one new query, H=%lld Hkv=%lld d=%lld%s; \"read\": the bandwidth "
        "probe, taking turns with the steps\n",
        static_cast<long long>(a.heads), static_cast<long long>(kv_heads),
        static_cast<long long>(a.head_dim),
        a.compete ? ", another process keeping one core busy" : "");
    std::printf("\n%8s %6s %7s %10s %9s %10s %9s\n", "cache", "dtype", "threads", "us/step", "GB/s",
                "%bandwidth", "speed-up");
  }
  const Tensor q = rand_normal({1, a.heads, 1, a.head_dim}, 3);
  for (int64_t length : a.cache) {
    ATTN_CHECK(length >= 1, "--cache must be >= 1, got ", length);
    std::vector<std::unique_ptr<KVCache>> caches;
    std::vector<std::function<void()>> steps;
    for (Dtype storage : storages) {
      KVCacheConfig config;
      config.n_kv_heads = kv_heads;
      config.head_dim = a.head_dim;
      config.capacity = length;
      config.dtype = storage;
      caches.push_back(std::make_unique<KVCache>(config));
      KVCache& cache = *caches.back();
      const int64_t fill = 4096;  // append in pieces: the random K/V never exist whole
      for (int64_t t0 = 0; t0 < length; t0 += fill) {
        const int64_t n = std::min(fill, length - t0);
        cache.append(rand_normal({1, kv_heads, n, a.head_dim}, 1 + t0),
                     rand_normal({1, kv_heads, n, a.head_dim}, 2 + t0));
      }
      steps.emplace_back([&q, &cache] { attend_cached(q, cache); });
    }
    for (int threads : thread_counts) {
      set_num_threads(threads);
      ReadBandwidthProbe probe(static_cast<int64_t>(probe_bytes(length)), threads);
      std::vector<std::function<void()>> turns = steps;
      turns.emplace_back([&probe] { probe.pass_gbps(); });
      const std::vector<double> ms = interleaved_median_ms(a.runs, turns);
      const double bandwidth = probe.bytes_per_pass() / ms.back() / 1e6;  // GB/s
      if (!a.json) {
        std::printf("%8lld %6s %7d %10.1f %9.1f %9.0f%%\n", static_cast<long long>(length), "read",
                    threads, 1e3 * ms.back(), bandwidth, 100.0);
      }
      for (size_t i = 0; i < storages.size(); ++i) {
        const double us = 1e3 * ms[i], gbps = cache_bytes(storages[i], length) / us / 1e3;
        if (a.json) {
          std::printf(
              "{\"cache\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, "
              "\"cache_dtype\": \"%s\", \"threads\": %d, \"us\": %.2f, \"gbps\": %.2f, "
              "\"bandwidth_gbps\": %.2f, \"compete\": %s}\n",
              static_cast<long long>(length), static_cast<long long>(a.heads),
              static_cast<long long>(kv_heads), static_cast<long long>(a.head_dim),
              to_string(storages[i]).c_str(), threads, us, gbps, bandwidth,
              a.compete ? "true" : "false");
        } else {
          std::printf("%8lld %6s %7d %10.1f %9.1f %9.0f%% %8.2fx\n", static_cast<long long>(length),
                      to_string(storages[i]).c_str(), threads, us, gbps, 100.0 * gbps / bandwidth,
                      ms[0] / ms[i]);
        }
        std::fflush(stdout);
      }
    }
  }
  set_num_threads(0);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Benchmarks (not tests): attn bench forward --help, attn bench backward --help,\n"
      "attn bench decode --help, attn bench generate --help, attn bench tokenizer --help");
  bench->require_subcommand(1);
  auto a = std::make_shared<AttentionBenchArgs>();
  CLI::App* fwd = bench->add_subcommand(
      "forward",
      "Time self-attention (B, H, T, d) forward passes: median ms of --runs after a warm-up,\n"
      "GFLOP/s (4·B·H·T²·d, the full square even when causal), useful GFLOP/s\n"
      "(2·B·H·T·(T+1)·d when causal), the fraction of the FMA peak measured in the same run\n"
      "with the same thread count, the speed-up over the reference path (same run, up to\n"
      "--reference-max-seq) and the process's peak resident memory. The kernels run the\n"
      "widest SIMD set the CPU has; ATTN_SIMD=avx2 times the AVX2 code (the peak too).");
  add_attention_bench_options(*fwd, *a);
  fwd->footer(
      "Example: attn bench forward --seq 1024,4096 --heads 16 --head-dim 64 --causal --threads "
      "1,2");
  fwd->callback([a] { run_forward(*a); });

  add_bench_backward_command(*bench);
  add_bench_generate_command(*bench);
  add_bench_tokenizer_command(*bench);
  add_bench_ring_command(*bench);

  auto dec = std::make_shared<DecodeArgs>();
  CLI::App* decode = bench->add_subcommand(
      "decode",
      "Time one decode step: one new query per head against a KV cache of L positions (the\n"
      "attention alone). Reports microseconds per step (median of --runs after a warm-up),\n"
      "GB/s of K and V read, and the fraction of the read bandwidth the bench measures itself\n"
      "(the \"read\" row: a pass over as many bytes, from memory, taking turns with the steps).");
  decode->add_option("--cache", dec->cache, "cache lengths, e.g. --cache 1024,65536")
      ->delimiter(',')
      ->capture_default_str()
      ->check(positive());
  decode->add_option("--heads", dec->heads, "query heads")
      ->capture_default_str()
      ->check(positive());
  decode->add_option("--kv-heads", dec->kv_heads, "cached heads (GQA; default = --heads)")
      ->check(positive());
  decode->add_option("--head-dim", dec->head_dim, "head width d")
      ->capture_default_str()
      ->check(positive());
  decode
      ->add_option("--cache-dtype", dec->dtypes,
                   "cache storages, each timed in turn; speed-up is against the first, e.g.\n"
                   "--cache-dtype bf16,q8")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "bf16", "q8"}))
      ->capture_default_str();
  decode
      ->add_option("--threads", dec->threads,
                   "thread counts, e.g. --threads 1,2 (default: all cores)")
      ->delimiter(',')
      ->check(in_range(1, kMaxThreads));
  decode
      ->add_option("--runs", dec->runs, "timed runs, the storages taking turns (medians reported)")
      ->capture_default_str()
      ->check(in_range(1, 100000));
  decode->add_flag("--compete", dec->compete, "keep one core busy with another process meanwhile");
  decode->add_flag("--json", dec->json, "one JSON object per line");
  decode->footer(
      "Example: attn bench decode --cache 1024,65536 --heads 16 --kv-heads 4 --cache-dtype "
      "bf16,q8 --threads 1,2");
  decode->callback([dec] { run_decode(*dec); });
}

}  // namespace attn::cli
