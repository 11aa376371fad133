// The timer the library's entry points open (attn/phase_clock.hpp). Internal.
#pragma once

#include <atomic>
#include <cstdint>

#include "attn/phase_clock.hpp"

namespace attn::detail {

extern std::atomic<bool> g_phase_clock_on;

// Adds the wall time from construction to destruction to `phase`, when the clock is on, this
// thread is outside a parallel loop's body, and no other scope is open on it.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase) {
    if (g_phase_clock_on.load(std::memory_order_relaxed)) start(phase);
  }
  ~PhaseScope() {
    if (timing_) stop();
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  void start(Phase phase);
  void stop();

  Phase phase_ = Phase::kMatmul;
  bool timing_ = false;
  int64_t start_ns_ = 0;
};

// Whether this thread is running a body of parallel_for (threads.cpp).
bool inside_parallel_body();

}  // namespace attn::detail
