// How many threads the library uses, and the parallel loop it uses them with.
#pragma once

#include <cstdint>
#include <functional>

namespace attn {

// The most threads a count may ask for: each is a pool thread, so a typo of 10^6 would
// otherwise try to start a million of them.
inline constexpr int kMaxThreads = 1024;

// The thread count for every parallel loop of the library. Defaults to the ATTN_NUM_THREADS
// environment variable when it is set (a whole number from 1 to kMaxThreads; anything else is
// an attn::Error), else to the number of cores.
int num_threads();
// Sets the count (1 to kMaxThreads; 0 restores the default). attn::Error for any other n.
void set_num_threads(int n);

// Calls body(i) for every i in [0, n), spread over num_threads() threads (the caller is one of
// them). Each index runs exactly once, so a body that writes only what index i owns gives
// results independent of the thread count. The indices are cut into one contiguous share per
// thread (the caller's first); a thread runs its own share in increasing order, then helps
// with what is left of the others'. So loops over the same rows, one after another, give each
// core the same rows every time (they stay in its cache); where the cost of an index grows or
// shrinks steadily with it, order the indices by alternating_ends so the shares cost about
// the same. Idle workers block (after a short spin of a
// few microseconds), so a busy core elsewhere does not stall the loop; and while the helpers get
// no core of their own (another process busy), short loops run on the caller alone for a
// while (src/core/share_monitor.hpp) — which changes speed, never results. An exception thrown by
// a body is rethrown here (the first one; the remaining indices are skipped). Calls from
// inside a body run serially on the calling thread.
void parallel_for(int64_t n, const std::function<void(int64_t)>& body);

// The index at position i of [0, n) in the order 0, n − 1, 1, n − 2, 2, …: a loop over tasks
// whose cost changes steadily with their index (a causal mask's query blocks) runs task
// alternating_ends(i, n) as its i-th, so every contiguous share mixes cheap and dear tasks.
inline int64_t alternating_ends(int64_t i, int64_t n) { return i % 2 == 0 ? i / 2 : n - 1 - i / 2; }

// As parallel_for, and also passes the worker's index in [0, num_threads()), for per-thread
// scratch: body(i, worker).
void parallel_for_workers(int64_t n, const std::function<void(int64_t, int)>& body);

}  // namespace attn
