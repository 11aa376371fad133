// Parallel loops over the rows or columns of a (rows, cols) matrix, in fixed chunks, so a
// result never depends on the thread count: each row (or column) is computed by one thread,
// and sums over rows always run in row order.
#pragma once

#include <algorithm>
#include <cstdint>

#include "attn/threads.hpp"

namespace attn::detail {

// body(first, last) for consecutive ranges of about `grain` indices covering [0, n).
template <class Body>
void parallel_ranges(int64_t n, int64_t grain, const Body& body) {
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks <= 1) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  parallel_for(chunks, [&](int64_t c) { body(c * grain, std::min(n, (c + 1) * grain)); });
}

}  // namespace attn::detail
