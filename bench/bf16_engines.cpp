// The engines of attention's bf16 products side by side, on whatever this CPU has: float
// products, AMX tiles, AVX-512 BF16's vdpbf16ps (forced on, even where the library would not
// choose it: an Intel CPU), and the vector kernels on rounded floats — the causal forward and
// backward (B 1, H 16, d 64 unless given; every thread), the engines taking turns run after run,
// least and median ms. A benchmark, not a test; docs/performance.md has its figures.
//
//   build/release/bf16_engines [T=1024] [RUNS=9] [B=1 H=16 D=64]
//
// (The small GPT's step: bf16_engines 64 2000 12 4 32.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "src/core/simd_cap.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Engine {
  const char* name;
  attn::Dtype precision;
  bool amx;
  attn::detail::Dpbf16Use dpbf16;
  bool available;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void use(const Engine& e) {
  attn::detail::set_amx_allowed(e.amx);
  attn::detail::set_dpbf16_use(e.dpbf16);
}

}  // namespace

int main(int argc, char** argv) {
  using attn::detail::Dpbf16Use;
  const int64_t t = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 9;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 1;
  const int64_t heads = argc > 4 ? std::atoll(argv[4]) : 16;
  const int64_t dim = argc > 5 ? std::atoll(argv[5]) : 64;
  const attn::Tensor q = attn::rand_normal({batch, heads, t, dim}, 1),
                     k = attn::rand_normal({batch, heads, t, dim}, 2),
                     v = attn::rand_normal({batch, heads, t, dim}, 3),
                     d_out = attn::rand_normal({batch, heads, t, dim}, 4);
  std::vector<Engine> engines = {
      {"f32", attn::Dtype::kFloat32, false, Dpbf16Use::kNever, true},
      {"bf16 AMX", attn::Dtype::kBFloat16, true, Dpbf16Use::kNever, false},
      {"bf16 vdpbf16ps", attn::Dtype::kBFloat16, false, Dpbf16Use::kAlways, false},
      {"bf16 vector", attn::Dtype::kBFloat16, false, Dpbf16Use::kNever, true}};
  use(engines[1]);
  engines[1].available = attn::detail::amx_bf16_usable();
  use(engines[2]);
  engines[2].available = attn::detail::dpbf16_usable();
  std::vector<std::vector<double>> forward(engines.size()), backward(engines.size());
  for (int r = 0; r < runs; ++r) {
    for (size_t e = 0; e < engines.size(); ++e) {
      if (!engines[e].available) continue;
      use(engines[e]);
      attn::SdpaOptions options;
      options.causal = true;
      options.precision = engines[e].precision;
      const auto start = Clock::now();
      const attn::SdpaResult f = attn::sdpa(q, k, v, options);
      const auto middle = Clock::now();
      attn::sdpa_backward(q, k, v, f.output, f.logsumexp, d_out, options);
      const auto end = Clock::now();
      forward[e].push_back(ms_between(start, middle));
      backward[e].push_back(ms_between(middle, end));
    }
  }
  attn::detail::set_amx_allowed(true);
  attn::detail::set_dpbf16_use(Dpbf16Use::kWhereFaster);
  std::printf("causal, B %lld, H %lld, T %lld, d %lld; %d runs each, engines in turn\n",
              static_cast<long long>(batch), static_cast<long long>(heads),
              static_cast<long long>(t), static_cast<long long>(dim), runs);
  std::printf("%-16s %22s %22s\n", "engine", "forward least / median", "backward least / median");
  for (size_t e = 0; e < engines.size(); ++e) {
    if (!engines[e].available) {
      std::printf("%-16s %22s\n", engines[e].name, "(not on this CPU)");
      continue;
    }
    std::sort(forward[e].begin(), forward[e].end());
    std::sort(backward[e].begin(), backward[e].end());
    std::printf("%-16s %10.2f / %8.2f ms %10.2f / %8.2f ms\n", engines[e].name, forward[e][0],
                forward[e][forward[e].size() / 2], backward[e][0],
                backward[e][backward[e].size() / 2]);
  }
}
