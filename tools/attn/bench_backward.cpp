// attn bench backward: times the attention backward (the fused kernel, or the reference path)
// on self-attention shapes, next to the fused forward of the same shape in the same run.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/sdpa_varlen.hpp"
#include "attn/simd.hpp"
#include "attn/threads.hpp"
#include "bench_util.hpp"
#include "commands.hpp"
#include "hot/fma_peak.hpp"

namespace attn::cli {
namespace {

// One backward problem: the attention alone (inputs, the forward's results, dL/dO; with
// --packed, (T, H, d) rows and the sequences' offsets), or with --block a MultiHeadAttention
// layer (d_model = H·d) with its saved activations and dL/dY.
struct BackwardProblem {
  Tensor q, k, v, d_out;
  std::vector<int64_t> offsets;  // --packed: cu_seqlens of q and of k, v alike
  SdpaResult forward;
  SdpaOptions options;
  Tensor kept_mask_gradient;  // --variant bias-grad-kept: the buffer every call writes
  std::unique_ptr<MultiHeadAttention> layer;
  Tensor x;
  MhaActivations saved;

  // MiB of everything the caller holds: inputs, forward results, dL/dout and the gradients,
  // and with --variant bias… the (H, T, T) bias and its gradient.
  double tensor_mib() const {
    double floats = 0.0;
    if (layer) {
      const double weights = double(layer->wqkv.numel()) + layer->wo.numel();
      floats = 3.0 * x.numel() + saved.qkv.numel() + saved.attended.numel() +
               saved.logsumexp.numel() + 2 * weights;  // x, y, dy, dx; activations; W, dW
    } else {
      floats = 2.0 * (q.numel() + k.numel() + v.numel()) + forward.output.numel() +
               forward.logsumexp.numel() + d_out.numel();
    }
    const double bias = options.mask.values.defined() ? double(options.mask.values.numel()) : 0.0;
    floats += options.return_mask_gradient ? 2.0 * bias : bias;
    return floats * 4 / (1024.0 * 1024.0);
  }
};

// The forward of the problem; its results are kept for the backward.
void forward_of(BackwardProblem& p) {
  if (p.layer) {
    p.saved = MhaActivations{};
    p.layer->forward(p.x, p.options, p.saved);
  } else if (!p.offsets.empty()) {
    p.forward = sdpa_varlen(p.q, p.k, p.v, p.offsets, p.offsets, p.options);
  } else {
    p.forward = sdpa(p.q, p.k, p.v, p.options);
  }
}

std::unique_ptr<BackwardProblem> make_problem(const AttentionBenchArgs& a, int64_t kv_heads,
                                              int64_t t_len) {
  auto p = std::make_unique<BackwardProblem>();
  p->options.causal = a.causal;
  apply_bench_variant(a, t_len, p->options);
  if (a.variant == "bias-grad-kept") p->kept_mask_gradient = Tensor(p->options.mask.values.shape());
  if (a.block) {
    MhaConfig config;
    config.d_model = a.heads * a.head_dim;
    config.n_heads = a.heads;
    config.n_kv_heads = kv_heads;
    config.seed = 5;
    p->layer = std::make_unique<MultiHeadAttention>(config);
    p->x = rand_normal({a.batch, t_len, config.d_model}, 1);
    p->d_out = rand_normal({a.batch, t_len, config.d_model}, 4);
    p->layer->forward(p->x, p->options, p->saved);
    return p;
  }
  p->q = rand_normal({a.batch, a.heads, t_len, a.head_dim}, 1);
  p->k = rand_normal({a.batch, kv_heads, t_len, a.head_dim}, 2);
  p->v = rand_normal({a.batch, kv_heads, t_len, a.head_dim}, 3);
  p->d_out = rand_normal({a.batch, a.heads, t_len, a.head_dim}, 4);
  if (a.packed > 1) {  // the same rows, packed (T, H, d)
    p->offsets = packed_offsets(a, t_len);
    for (Tensor* x : {&p->q, &p->k, &p->v, &p->d_out}) *x = packed_rows(*x);
  }
  forward_of(*p);
  return p;
}

void backward_with(const std::string& impl, BackwardProblem& p) {
  if (p.layer) {
    ATTN_CHECK(impl == "fused", "bench backward: --block runs the fused path only");
    p.layer->backward(p.saved, p.d_out);
  } else if (!p.offsets.empty()) {
    sdpa_varlen_backward(p.q, p.k, p.v, p.forward.output, p.forward.logsumexp, p.d_out, p.offsets,
                         p.offsets, p.options);
  } else if (impl == "reference") {
    reference::sdpa_backward(p.q, p.k, p.v, p.d_out, p.options);
  } else if (p.kept_mask_gradient.defined()) {
    sdpa_backward(p.q, p.k, p.v, p.forward.output, p.forward.logsumexp, p.d_out, p.options,
                  p.kept_mask_gradient);
  } else {
    sdpa_backward(p.q, p.k, p.v, p.forward.output, p.forward.logsumexp, p.d_out, p.options);
  }
}

void print_header(const AttentionBenchArgs& a, int64_t kv_heads,
                  const std::map<int, double>& peak) {
  std::printf("attn bench backward: B=%lld H=%lld Hkv=%lld d=%lld %s%s, %s path%s\n",
              static_cast<long long>(a.batch), static_cast<long long>(a.heads),
              static_cast<long long>(kv_heads), static_cast<long long>(a.head_dim),
              a.causal ? "causal" : "non-causal", bench_variant_words(a).c_str(), a.impl.c_str(),
              a.compete ? ", another process keeping one core busy" : "");
  for (const auto& [threads, gflops] : peak) {
    std::printf("measured FMA peak, %d thread(s), %s: %.0f GFLOP/s\n", threads,
                simd_target().c_str(), gflops);
  }
  std::printf(
      "GFLOP/s counts 10·B·H·T²·d (five T×T×d products, the full square, causal too);\n"
      "useful counts 5·B·H·T·(T+1)·d when causal. fwd ms: the fused forward, same run.\n"
      "tensors MiB: what the caller holds (inputs, forward results, dO, gradients).\n%s\n",
      a.block ? "--block: the MultiHeadAttention layer's backward (its GFLOP/s add the "
                "projections' weight and input gradients); fwd ms: its forward.\n"
              : "");
  std::printf("%7s %7s %10s %9s %8s %9s %9s %7s %8s %8s %8s\n", "seq", "threads", "ms", "fwd ms",
              "bwd/fwd", "GFLOP/s", "useful", "%peak", "vs ref", "rss MiB", "tensors");
}

void run_backward(const AttentionBenchArgs& a) {
  const int64_t kv_heads = resolved_kv_heads(a);
  ATTN_CHECK(a.packed == 1 || a.impl == "fused",
             "bench backward: --packed runs the fused path only");
  check_bench_memory(a, kv_heads, 2);
  const std::vector<int> thread_counts = thread_counts_or_all(a.threads);
  CompetingProcess competitor(a.compete);
  std::map<int, double> peak;
  for (int t : thread_counts) peak[t] = measure_fma_peak_gflops(t);
  if (!a.json) print_header(a, kv_heads, peak);
  for (int64_t t_len : a.seq) {
    ATTN_CHECK(t_len >= 1, "--seq must be >= 1, got ", t_len);
    const std::unique_ptr<BackwardProblem> p = make_problem(a, kv_heads, t_len);
    const AttentionFlops attention = attention_flops(a, t_len, 5);
    double square = attention.square, useful = attention.useful;
    if (a.block) {  // two products per projection (weight and input gradients): twice the forward's
      const double d_model = double(a.heads) * a.head_dim;
      const double width = double(a.heads + 2 * kv_heads) * a.head_dim;
      const double projections = 4.0 * a.batch * double(t_len) * d_model * (width + d_model);
      square += projections;
      useful += projections;
    }
    for (int threads : thread_counts) {
      set_num_threads(threads);
      const double ms = median_ms(a.runs, [&] { backward_with(a.impl, *p); });
      const double forward_ms = median_ms(a.runs, [&] { forward_of(*p); });
      double reference_ms = -1.0;  // not measured
      if (a.impl == "fused" && !a.block && a.packed == 1 && t_len <= a.reference_max_seq) {
        reference_ms = median_ms(1, [&] { backward_with("reference", *p); });
      }
      const double gflops = square / ms / 1e6, useful_gflops = useful / ms / 1e6;
      const double rss = peak_rss_mib();
      if (a.json) {
        const AttentionBenchRow row{t_len,         kv_heads,      threads,      ms, gflops,
                                    useful_gflops, peak[threads], reference_ms, rss};
        std::printf("{%s, \"forward_ms\": %.3f, \"tensor_mib\": %.1f}\n",
                    attention_json_fields(a, row).c_str(), forward_ms, p->tensor_mib());
      } else {
        const std::string vs_ref =
            reference_ms < 0 ? "-" : detail::concat(int(reference_ms / ms), "x");
        std::printf("%7lld %7d %10.2f %9.2f %7.2fx %9.1f %9.1f %6.0f%% %8s %8.0f %8.0f\n",
                    static_cast<long long>(t_len), threads, ms, forward_ms, ms / forward_ms, gflops,
                    useful_gflops, 100.0 * useful_gflops / peak[threads], vs_ref.c_str(), rss,
                    p->tensor_mib());
      }
      std::fflush(stdout);
    }
  }
  set_num_threads(0);
}

}  // namespace

void add_bench_backward_command(CLI::App& bench) {
  auto a = std::make_shared<AttentionBenchArgs>();
  CLI::App* bwd = bench.add_subcommand(
      "backward",
      "Time the attention backward (dQ, dK, dV from dO) on self-attention (B, H, T, d) shapes:\n"
      "median ms of --runs after a warm-up, the fused forward of the same shape in the same run\n"
      "and the ratio, GFLOP/s (10·B·H·T²·d; useful: 5·B·H·T·(T+1)·d when causal), the fraction\n"
      "of the FMA peak measured in the same run, the speed-up over the reference backward (up to\n"
      "--reference-max-seq), peak resident memory and the MiB of the tensors themselves.\n"
      "ATTN_SIMD=avx2 times the AVX2 code (the peak too).");
  add_attention_bench_options(*bwd, *a);
  bwd->footer(
      "Example: attn bench backward --seq 1024,4096 --heads 16 --head-dim 64 --causal --threads "
      "1,2");
  bwd->callback([a] { run_backward(*a); });
}

}  // namespace attn::cli
