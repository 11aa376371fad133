// The machine's memory read bandwidth, measured: threads summing a buffer far larger than the
// caches.
#pragma once

#include <cstdint>
#include <vector>

namespace attn::cli {

// GB/s (1e9 bytes per second) reading with `threads` threads, best of a few passes.
double measure_read_bandwidth_gbps(int threads);

// Reads of the given number of bytes, one timed pass per call, from a buffer 512 MiB larger
// (kProbeExtraBytes), each pass starting where the last ended: a workload that streams that
// many bytes, timed next to each pass, is set against the bandwidth of the same moment (these
// VMs' neighbours move it by tens of percent within seconds), and neither finds its bytes in
// the L3 (260 MiB on the Xeon) — between two reads of the same probe bytes lie at least 512 MiB
// of other probe bytes besides the workload's.
constexpr int64_t kProbeExtraBytes = int64_t{512} << 20;
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(int64_t bytes, int threads);
  double pass_gbps();  // one timed pass with the threads given
  // What a pass reads: the bytes asked for, rounded up to the 1 MiB chunks the threads share.
  double bytes_per_pass() const;

 private:
  std::vector<float> data_;
  int64_t chunks_per_pass_;
  int64_t next_chunk_ = 0;
  int threads_;
};

}  // namespace attn::cli
