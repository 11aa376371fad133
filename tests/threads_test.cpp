// parallel_for: every index once, at any thread count (more threads than the pool keeps shares
// for inline, too); exceptions reach the caller.
#include "attn/threads.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "test_util.hpp"

namespace attn {
namespace {

class ThreadCount : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { set_num_threads(GetParam()); }
  void TearDown() override { set_num_threads(0); }
};

TEST_P(ThreadCount, EveryIndexRunsExactlyOnce) {
  // Counts below, at and above the thread count: some threads' shares are empty.
  for (int64_t n : {1, 2, 3, 5, 8, 9, 17, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1) << "n = " << n;
  }
  parallel_for(0, [](int64_t) { FAIL() << "no index to run"; });
}

TEST(Threads, AlternatingEndsIsAPermutationFromBothEnds) {
  EXPECT_EQ(alternating_ends(0, 5), 0);
  EXPECT_EQ(alternating_ends(1, 5), 4);
  EXPECT_EQ(alternating_ends(2, 5), 1);
  EXPECT_EQ(alternating_ends(3, 5), 3);
  EXPECT_EQ(alternating_ends(4, 5), 2);
  for (int64_t n = 1; n <= 20; ++n) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) seen[static_cast<size_t>(alternating_ends(i, n))]++;
    for (int count : seen) ASSERT_EQ(count, 1) << "n = " << n;
  }
}

TEST_P(ThreadCount, ExceptionsPropagate) {
  EXPECT_THROW(parallel_for(100,
                            [](int64_t i) {
                              if (i == 57) throw std::runtime_error("57");
                            }),
               std::runtime_error);
}

TEST_P(ThreadCount, ManySmallJobsBackToBack) {
  // Lost wake-ups between jobs would hang here (ctest's timeout turns that into a failure).
  int64_t total = 0;
  for (int job = 0; job < 3000; ++job) {
    std::atomic<int64_t> sum{0};
    parallel_for(job % 5, [&](int64_t i) { sum += i + 1; });
    total += sum.load();
  }
  EXPECT_EQ(total, 600 * (0 + 1 + 3 + 6 + 10));
}

TEST_P(ThreadCount, WorkerIndicesAreInRangeAndNestedCallsKeepTheirs) {
  std::vector<std::atomic<int>> bad(1);
  parallel_for_workers(64, [&](int64_t, int worker) {
    if (worker < 0 || worker >= num_threads()) bad[0]++;
    parallel_for_workers(4, [&](int64_t, int inner) { bad[0] += inner != worker; });
  });
  EXPECT_EQ(bad[0].load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Threads, ThreadCount, ::testing::Values(1, 2, 3, 9));

TEST(Threads, SetAndDefault) {
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_TRUE(testing::ThrowsWith([] { set_num_threads(-1); },
                                  "n must be in [0, 1024] (0: the default), got -1"));
  EXPECT_TRUE(testing::ThrowsWith([] { set_num_threads(kMaxThreads + 1); }, "got 1025"));
  EXPECT_EQ(num_threads(), 3);  // unchanged by the refusals
  set_num_threads(0);
  EXPECT_GE(num_threads(), 1);
}

// A forked child has only the forking thread: the pool the parent started is gone there, and
// a job posted to it used to wait for ever. The child starts a pool of its own, and the
// parent's keeps working. SIGALRM ends a child that hangs, which fails the test.
TEST(Threads, AForkedChildRunsParallelLoopsOnAPoolOfItsOwn) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer refuses to start threads in a child of a multi-threaded "
                  "fork (a limit of its own); the Release and ASan runs test this";
#endif
  set_num_threads(2);
  const auto sum_of_squares = [] {
    std::vector<int64_t> squares(1000);
    parallel_for(1000, [&](int64_t i) { squares[i] = i * i; });
    int64_t total = 0;
    for (const int64_t s : squares) total += s;
    return total;
  };
  const int64_t expected = sum_of_squares();  // the parent's pool is running
  for (int child = 0; child < 3; ++child) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(30);
      _exit(sum_of_squares() == expected && sum_of_squares() == expected ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child " << child << ": status " << status;
  }
  EXPECT_EQ(sum_of_squares(), expected);
  set_num_threads(0);
}

}  // namespace
}  // namespace attn
