// The phase clock: one total per phase, added to by the outermost PhaseScope of the thread
// that runs the library's calls.
#include <chrono>
#include <mutex>

#include "src/core/phase_scope.hpp"

namespace attn {
namespace {

std::mutex g_totals_mutex;
PhaseTotals g_totals;
thread_local bool t_scope_open = false;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace detail {

std::atomic<bool> g_phase_clock_on{false};

void PhaseScope::start(Phase phase) {
  if (t_scope_open || inside_parallel_body()) return;
  t_scope_open = true;
  timing_ = true;
  phase_ = phase;
  start_ns_ = now_ns();
}

void PhaseScope::stop() {
  const double seconds = static_cast<double>(now_ns() - start_ns_) * 1e-9;
  t_scope_open = false;
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  g_totals.seconds[static_cast<int>(phase_)] += seconds;
  ++g_totals.calls[static_cast<int>(phase_)];
}

}  // namespace detail

const char* phase_name(Phase phase) {
  // In Phase's order.
  static constexpr const char* kNames[kPhaseCount] = {
      "matmul", "attention", "layer_norm", "gelu", "cross_entropy", "embedding", "optimizer"};
  return kNames[static_cast<int>(phase)];
}

void set_phase_clock(bool on) { detail::g_phase_clock_on.store(on); }

PhaseTotals phase_totals() {
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  return g_totals;
}

void reset_phase_totals() {
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  g_totals = PhaseTotals{};
}

}  // namespace attn
