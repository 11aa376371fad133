// The machine's core count, for what must not depend on the thread count set (how products
// and the backward are split, so that results are bitwise the same for any set_num_threads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>

namespace attn::detail {

// Read once: std::thread::hardware_concurrency() opens and reads
// /sys/devices/system/cpu/online on every call (about 2 µs on the VMs here), and every matrix
// product asked for it: 150 times a step of the small GPT.
inline int64_t machine_cores() {
  static const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return cores;
}

}  // namespace attn::detail
