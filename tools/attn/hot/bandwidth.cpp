// Read bandwidth: 512 MiB (far past the L3) summed in 1 MiB chunks handed to the threads,
// with Highway vectors and four independent accumulators so the loop is bound by memory, not
// by the add latency. The decode kernel reads K and V the same way: sequential rows.
#include "tools/attn/hot/bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tools/attn/hot/bandwidth.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::cli {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The quarters of the chunk are read side by side: four streams in flight per core, as the
// weight kernels read four rows. One stream alone left a single core ~15 % below what those
// kernels reached, so the "limit" was not one.
float SumFloats(const float* data, int64_t count) {
  const hn::ScalableTag<float> df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df)), quarter = count / 4;
  const float *q0 = data, *q1 = data + quarter, *q2 = q1 + quarter, *q3 = q2 + quarter;
  auto a = hn::Zero(df), b = a, c = a, d = a;
  for (int64_t i = 0; i + n <= quarter; i += n) {
    a = hn::Add(a, hn::LoadU(df, q0 + i));
    b = hn::Add(b, hn::LoadU(df, q1 + i));
    c = hn::Add(c, hn::LoadU(df, q2 + i));
    d = hn::Add(d, hn::LoadU(df, q3 + i));
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a, b), hn::Add(c, d))));
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::cli
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "attn/threads.hpp"

namespace attn::cli {

HWY_EXPORT(SumFloats);

namespace {

constexpr int64_t kChunk = int64_t{256} << 10;  // floats: 1 MiB, a task of the pool

// GB/s of one read of `count` chunks of data, from chunk `first` on, wrapping at its end, with
// `threads` threads (the previous count restored).
double timed_pass_gbps(const std::vector<float>& data, int64_t first, int64_t count, int threads) {
  const int previous = num_threads();
  set_num_threads(threads);
  const int64_t chunks = static_cast<int64_t>(data.size()) / kChunk;
  std::vector<float> sums(static_cast<size_t>(count));
  const auto start = std::chrono::steady_clock::now();
  parallel_for(count, [&](int64_t i) {
    const int64_t chunk = (first + i) % chunks;
    sums[static_cast<size_t>(i)] =
        HWY_DYNAMIC_DISPATCH(SumFloats)(data.data() + chunk * kChunk, kChunk);
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_num_threads(previous);
  return static_cast<double>(count * kChunk) * 4.0 / seconds / 1e9;
}

}  // namespace

double measure_read_bandwidth_gbps(int threads) {
  constexpr int64_t kFloats = int64_t{128} << 20;               // 512 MiB
  std::vector<float> data(static_cast<size_t>(kFloats), 1.0f);  // touched: no page faults below
  double best = 0.0;
  for (int pass = 0; pass < 4; ++pass) {
    best = std::max(best, timed_pass_gbps(data, 0, kFloats / kChunk, threads));
  }
  return best;
}

ReadBandwidthProbe::ReadBandwidthProbe(int64_t bytes, int threads)
    : chunks_per_pass_(std::max<int64_t>(1, (bytes / 4 + kChunk - 1) / kChunk)), threads_(threads) {
  const int64_t chunks = chunks_per_pass_ + kProbeExtraBytes / 4 / kChunk;
  data_.assign(static_cast<size_t>(chunks * kChunk), 1.0f);
}

double ReadBandwidthProbe::pass_gbps() {
  const int64_t first = next_chunk_;
  next_chunk_ = (first + chunks_per_pass_) % (static_cast<int64_t>(data_.size()) / kChunk);
  return timed_pass_gbps(data_, first, chunks_per_pass_, threads_);
}

double ReadBandwidthProbe::bytes_per_pass() const {
  return static_cast<double>(chunks_per_pass_ * kChunk) * 4.0;
}

}  // namespace attn::cli
#endif  // HWY_ONCE
