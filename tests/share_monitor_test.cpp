// ShareMonitor: when the thread pool's helpers go without a core, short jobs run on the caller
// alone for a while. Times and CPU readings are made up, so nothing here depends on the machine.
#include "src/core/share_monitor.hpp"

#include <gtest/gtest.h>

namespace attn::detail {
namespace {

using Clock = ShareMonitor::Clock;
using std::chrono::milliseconds;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A monitor and the made-up clock and process CPU time it is fed.
struct Timeline {
  Clock::time_point now{};
  double cpu = 0;
  ShareMonitor monitor{[this] { return cpu; }};

  // Back-to-back jobs of `job` wall time with `gap` of caller-only time (one full CPU) before
  // each, until they add up to `total` of job time; each job gets `cpu_ratio` × its wall time
  // of CPU.
  void run(Clock::duration job, Clock::duration gap, Clock::duration total, double cpu_ratio,
           int helpers = 1) {
    for (Clock::duration done{}; done < total; done += job) {
      idle(gap);
      monitor.job_starting(now);
      now += job;
      cpu += cpu_ratio * seconds(job);
      monitor.job_finished(now, job, helpers);
    }
  }
  // The caller alone, a full CPU, no pool jobs.
  void idle(Clock::duration d) {
    now += d;
    cpu += seconds(d);
  }
  bool solo() const { return monitor.solo(now); }
};

TEST(ShareMonitor, HelpersOnFreeCoresKeepWorking) {
  Timeline t;
  t.run(milliseconds(1), milliseconds(1), milliseconds(200), 1.9);
  EXPECT_FALSE(t.solo());
}

TEST(ShareMonitor, StarvedHelpersSendShortJobsToTheCallerForAWhile) {
  Timeline t;
  t.run(milliseconds(1), milliseconds(1), milliseconds(20), 1.05);
  EXPECT_TRUE(t.solo());
  EXPECT_TRUE(t.monitor.solo(t.now + ShareMonitor::kSoloPeriod - milliseconds(1)));
  EXPECT_FALSE(t.monitor.solo(t.now + ShareMonitor::kSoloPeriod));
}

// A caller that waits between jobs (sleeping, reading input, waiting for a subprocess) spends no
// CPU then; that time must not be counted against the helpers.
TEST(ShareMonitor, AnIdleCallerBetweenJobsDoesNotLookLikeStarvedHelpers) {
  Timeline t;
  for (int job = 0; job < 200; ++job) {
    t.now += milliseconds(5);  // idle: no CPU
    t.monitor.job_starting(t.now);
    t.now += milliseconds(1);
    t.cpu += 1.9 * 0.001;
    t.monitor.job_finished(t.now, milliseconds(1), 1);
  }
  EXPECT_FALSE(t.solo());
  // Starved helpers are still found once the jobs come back to back.
  t.run(milliseconds(1), milliseconds(1), milliseconds(40), 1.05);
  EXPECT_TRUE(t.solo());
}

TEST(ShareMonitor, LongJobsKeepTheirHelpers) {
  // A job of 50 ms loses little by sharing a core, and gains when the scheduler moves a helper.
  Timeline t;
  t.run(milliseconds(50), milliseconds(1), milliseconds(200), 1.0);
  EXPECT_FALSE(t.solo());
}

TEST(ShareMonitor, ANewWindowStartsAfterTheSoloPeriod) {
  Timeline t;
  t.run(milliseconds(1), {}, milliseconds(20), 1.0);
  ASSERT_TRUE(t.solo());
  t.idle(ShareMonitor::kSoloPeriod);
  ASSERT_FALSE(t.solo());
  // The core came back: the helpers are measured afresh, not against the solo period.
  t.run(milliseconds(1), {}, milliseconds(40), 2.0);
  EXPECT_FALSE(t.solo());
}

TEST(ShareMonitor, NothingIsDecidedBeforeAWindowOfJobTime) {
  Timeline t;
  t.run(milliseconds(1), milliseconds(5), ShareMonitor::kWindow - milliseconds(2), 1.0);
  EXPECT_FALSE(t.solo());
}

TEST(ShareMonitor, TimeBetweenJobsIsNotCountedAgainstTheHelpers) {
  // Mostly serial code between short jobs: the process averages little more than one CPU,
  // but the jobs themselves get two.
  Timeline t;
  t.run(milliseconds(1), milliseconds(9), milliseconds(100), 1.95);
  EXPECT_FALSE(t.solo());
}

TEST(ShareMonitor, TheThresholdGrowsWithTheHelpers) {
  // 1.6 CPUs is enough for one helper (threshold 1 + 1/4) but starves three (1 + 3/4).
  Timeline one, three;
  one.run(milliseconds(1), {}, milliseconds(20), 1.6, 1);
  three.run(milliseconds(1), {}, milliseconds(20), 1.6, 3);
  EXPECT_FALSE(one.solo());
  EXPECT_TRUE(three.solo());
}

}  // namespace
}  // namespace attn::detail
