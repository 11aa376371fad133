// How many threads the library uses, and the parallel loop it uses them with.
#pragma once

#include <cstdint>
#include <functional>

namespace attn {

// The thread count for every parallel loop of the library. Defaults to the ATTN_NUM_THREADS
// environment variable when it holds a positive integer, else to the number of cores.
int num_threads();
// Sets the count (n ≥ 1; 0 restores the default). Throws attn::Error for n < 0.
void set_num_threads(int n);

// Calls body(i) for every i in [0, n), spread over num_threads() threads. Each index runs
// exactly once, so a body that writes only what index i owns gives results independent of
// the thread count. Threads block, never spin, while waiting. An exception thrown by a body is
// rethrown here (the first one; the remaining indices are skipped).
void parallel_for(int64_t n, const std::function<void(int64_t)>& body);

}  // namespace attn
