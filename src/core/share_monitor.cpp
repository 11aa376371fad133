#include "share_monitor.hpp"

namespace attn::detail {

void ShareMonitor::job_finished(Clock::time_point now, Clock::duration job_wall, int helpers) {
  jobs_wall_ += job_wall;
  ++jobs_;
  last_job_end_ = now;
  if (jobs_wall_ < kWindow) return;
  using Seconds = std::chrono::duration<double>;
  const double wall = Seconds(now - window_start_).count();
  const double jobs_seconds = Seconds(jobs_wall_).count();
  // Between jobs only the caller runs, at one CPU at most: what is left is the jobs' share.
  const double jobs_cpu = (process_cpu_() - window_cpu_) - (wall - jobs_seconds);
  const bool short_jobs = jobs_wall_ < jobs_ * kShortJob;
  if (short_jobs && jobs_cpu < (1.0 + 0.25 * helpers) * jobs_seconds) {
    solo_until_.store((now + kSoloPeriod).time_since_epoch().count(), std::memory_order_relaxed);
    measuring_ = false;  // the next window starts with the first job after the solo period
    return;
  }
  start_window(now);
}

}  // namespace attn::detail
