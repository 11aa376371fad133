// Decides whether the thread pool's helpers earn their keep, from how much CPU time the
// process gets while jobs run.
//
// Why: with another process keeping one of two cores busy, the scheduler put both of our
// threads on the free core and the busy process alone on the other; the pair then
// time-shared one core and paid for every hand-over, so two threads ran ~10 % slower than one.
// With h helpers on cores of their own, the CPU time a job gets is near (1 + h) × its wall
// time (seen: 1.9–2.1 with one helper); in that GPT run it was 1.0, while a memory-bound
// decode, whose helper still got half a core (1.47), ran 1.3× faster than on one thread.
// So below (1 + h/4) × wall the helpers are taken to be waiting for a core, and jobs run on
// the caller alone for a while; then the next window tries the helpers again, so a core that
// frees up is used again within a second. Only short jobs (the GPT's are ~0.5 ms) pay for a
// hand-over on a shared core; long ones (a decode over a 64k cache, ~70 ms) lose nothing by
// sharing it and gain whenever the scheduler moves a helper, so they keep their helpers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

namespace attn::detail {

class ShareMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  // process_cpu: the process's CPU time so far in seconds (read once per window, not per job:
  // it is a system call).
  explicit ShareMonitor(std::function<double()> process_cpu)
      : process_cpu_(std::move(process_cpu)) {}

  // Jobs decide nothing until they add up to this much wall time.
  static constexpr Clock::duration kWindow = std::chrono::milliseconds(20);
  // Windows whose jobs average this long or longer never send jobs to the caller alone.
  static constexpr Clock::duration kShortJob = std::chrono::milliseconds(2);
  // How long jobs run on the caller alone once the helpers were found starved.
  static constexpr Clock::duration kSoloPeriod = std::chrono::milliseconds(500);
  // A pause between jobs longer than this starts a new window: the estimate below counts the
  // time between jobs as the caller's CPU time, which an idle caller (sleeping, waiting for
  // input or another process) does not spend, so the window would find the helpers starved.
  static constexpr Clock::duration kIdleGap = std::chrono::milliseconds(2);

  // True while jobs should run on the caller alone. Safe to call from any thread.
  bool solo(Clock::time_point now) const {
    return now.time_since_epoch().count() < solo_until_.load(std::memory_order_relaxed);
  }

  // The pool calls these around each job it runs with helpers (one job at a time).
  void job_starting(Clock::time_point now) {
    if (!measuring_ || now - last_job_end_ > kIdleGap) start_window(now);
  }
  void job_finished(Clock::time_point now, Clock::duration job_wall, int helpers);

 private:
  void start_window(Clock::time_point now) {
    measuring_ = true;
    window_start_ = now;
    window_cpu_ = process_cpu_();
    jobs_wall_ = Clock::duration::zero();
    jobs_ = 0;
  }

  std::function<double()> process_cpu_;
  std::atomic<Clock::rep> solo_until_{0};
  bool measuring_ = false;  // false until the first job, and after a solo period starts
  Clock::time_point window_start_;
  double window_cpu_ = 0;
  Clock::duration jobs_wall_{};
  int64_t jobs_ = 0;
  Clock::time_point last_job_end_;
};

}  // namespace attn::detail
