// A deliberately simple parallel loop: threads started per call and joined at the end.
// Starting a thread costs ~20-50 µs here, which is noise next to the reference path's work;
// the fused kernels of a later stage get a persistent pool. Joining blocks in the kernel, so
// nothing spins when the other core is busy (OpenMP's default spin-wait was measured 4-14×
// slower on this shared machine).
#include "attn/threads.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attn/error.hpp"

namespace attn {
namespace {

std::atomic<int> g_requested_threads{0};  // 0 = default

int default_threads() {
  if (const char* env = std::getenv("ATTN_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 1024) return static_cast<int>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

int num_threads() {
  const int n = g_requested_threads.load();
  return n > 0 ? n : default_threads();
}

void set_num_threads(int n) {
  ATTN_CHECK(n >= 0, "set_num_threads: n (", n, ") must be >= 0");
  g_requested_threads.store(n);
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  const int64_t workers = std::min<int64_t>(num_threads(), n);
  if (workers == 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(n);  // skip what is left
      }
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(workers - 1));
  for (int64_t w = 1; w < workers; ++w) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace attn
