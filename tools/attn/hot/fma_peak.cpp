// FMA peak: independent accumulators per thread hide the FMA latency (4 cycles on 2 ports
// needs at least 8), in the widest vectors the CPU runs (Highway runtime dispatch). 16 of them
// with AVX-512's 32 registers; 12 with AVX2's 16, where 16 plus the two operands spilled to
// memory and the probe read 55 GFLOP/s on a Zen 3 core whose sgemm reached 60.
#include "tools/attn/hot/fma_peak.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tools/attn/hot/fma_peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::cli {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs `iterations` rounds of kChains FMAs; returns the FLOPs done and a value the compiler must
// keep.
double FmaLoop(int64_t iterations, float* sink) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
#if HWY_TARGET <= HWY_AVX3
  constexpr int kChains = 16;
#else
  constexpr int kChains = 12;
#endif
  V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = hn::Set(df, 1.0f + c * 1e-3f);
  const V a = hn::Set(df, 0.999999f), b = hn::Set(df, 1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = hn::MulAdd(acc[c], a, b);
  }
  V total = acc[0];
  for (int c = 1; c < kChains; ++c) total = hn::Add(total, acc[c]);
  *sink = hn::GetLane(total);
  return 2.0 * kChains * static_cast<double>(hn::Lanes(df)) * static_cast<double>(iterations);
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::cli
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "attn/threads.hpp"

namespace attn::cli {

HWY_EXPORT(FmaLoop);

double measure_fma_peak_gflops(int threads) {
  const int previous = num_threads();
  set_num_threads(threads);
  // 8 chunks of ~3 ms per thread: a thread that wakes late only shifts chunks to the other.
  constexpr int64_t kChunks = 8, kIterations = 500'000;
  const int64_t tasks = kChunks * threads;
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    std::vector<float> sinks(static_cast<size_t>(tasks) * 16);
    std::vector<double> flops(static_cast<size_t>(tasks));
    const auto start = std::chrono::steady_clock::now();
    parallel_for_workers(tasks, [&](int64_t task, int) {
      flops[task] = HWY_DYNAMIC_DISPATCH(FmaLoop)(kIterations, &sinks[task * 16]);
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double total = 0.0;
    for (double f : flops) total += f;
    best = std::max(best, total / seconds / 1e9);
  }
  set_num_threads(previous);
  return best;
}

}  // namespace attn::cli
#endif  // HWY_ONCE
