// The machine's memory read bandwidth, measured: threads summing a buffer far larger than the
// caches.
#pragma once

namespace attn::cli {

// GB/s (1e9 bytes per second) reading with `threads` threads, best of a few passes.
double measure_read_bandwidth_gbps(int threads);

}  // namespace attn::cli
