// A persistent pool of workers that block on a condition variable between jobs.
//
// Why not OpenMP: with its default spin-wait, PyTorch and ggml ran 4-14× slower on 2 threads
// than on 1 on this machine while another process kept one core busy, because a spinning
// thread burns the time slice its descheduled partner needs. Here a worker that finds no work
// spins for at most kSpinIterations pause instructions (5-35 µs by CPU, to catch back-to-back
// jobs), then sleeps in the kernel until the next job.
//
// Even so, a busy core elsewhere can leave the helpers without a core of their own; a
// ShareMonitor (share_monitor.hpp) notices and runs jobs on the caller alone for a while.
// Which thread runs an index never changes a result (see parallel_for): this changes speed only.
#include "attn/threads.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "attn/error.hpp"
#include "share_monitor.hpp"
#include "src/core/machine_cores.hpp"
#include "src/core/phase_scope.hpp"

namespace attn {
namespace {

// The pause instruction's length differs by CPU: 2000 of them took ~5 µs where this was set,
// and 34 µs on an Emerald Rapids Xeon (2026-12-06), where a time budget of 5 µs put half of the
// small GPT step's waits to sleep (the gaps between its ~120 jobs a step are mostly under 35 µs)
// and a sleeping helper's wake-up cost ~10 µs more a job. The count stays until a time budget
// has been measured on more CPUs than one.
constexpr int kSpinIterations = 2000;

std::atomic<int> g_requested_threads{0};  // 0 = default
thread_local bool t_inside_pool_job = false;
thread_local int t_worker = 0;  // this thread's worker index inside a job

// ATTN_NUM_THREADS when set (and not empty), else the core count. A value that is not a whole
// number in [1, kMaxThreads] is an error rather than silently ignored: a typo should not quietly
// run with a different thread count.
int default_threads() {
  const char* env = std::getenv("ATTN_NUM_THREADS");
  if (env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    ATTN_CHECK(end != env && *end == '\0' && n >= 1 && n <= kMaxThreads,
               "ATTN_NUM_THREADS must be a whole number from 1 to ", kMaxThreads, ", got '", env,
               "'");
    return static_cast<int>(n);
  }
  return static_cast<int>(detail::machine_cores());
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One job. Its indices are cut into one contiguous share per participating thread; a thread
// works through its own share first, in increasing order, then helps with the others'. So
// consecutive loops over the same rows (a matrix product, then LayerNorm, then GELU…) give
// each core the same rows each time, and it finds them in its own cache: with one shared
// counter whichever thread came first took the next index, and about half of every
// operation's rows had last been written by the other core.
struct Job {
  // One share's next index and end, on a cache line of its own (the threads update them).
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  static constexpr int kInlineShares = 8;

  Job(int64_t n_, const std::function<void(int64_t, int)>& body_, int threads)
      : n(n_), body(&body_), shares(threads) {
    if (threads > kInlineShares)
      heap_shares = std::make_unique<Share[]>(static_cast<size_t>(threads));
    share = heap_shares ? heap_shares.get() : inline_shares;
    for (int w = 0; w < threads; ++w) {
      share[w].next.store(n * w / threads);
      share[w].end = n * (w + 1) / threads;
    }
  }

  int64_t n;
  const std::function<void(int64_t, int)>* body;
  int shares;
  Share inline_shares[kInlineShares];
  std::unique_ptr<Share[]> heap_shares;
  Share* share;
  std::atomic<int> running{0};  // helpers still inside this job
  std::exception_ptr failure;
  std::mutex failure_mutex;

  void work(int worker) {
    t_inside_pool_job = true;
    t_worker = worker;
    for (int k = 0; k < shares; ++k) {
      Share& s = share[(worker + k) % shares];
      for (int64_t i = s.next.fetch_add(1); i < s.end; i = s.next.fetch_add(1)) run(i, worker);
    }
    t_inside_pool_job = false;
  }

 private:
  void run(int64_t i, int worker) {
    try {
      (*body)(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      for (int w = 0; w < shares; ++w) share[w].next.store(share[w].end);  // skip what is left
    }
  }
};

using Clock = detail::ShareMonitor::Clock;

// The process's CPU time so far, all threads, in seconds.
double process_cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

class Pool {
 public:
  ~Pool() { resize(0); }

  // Runs job on `helpers` pool threads plus the caller (worker 0). The pool keeps its size
  // between jobs, so a job with fewer indices than threads leaves some helpers idle instead of
  // restarting threads.
  void run(Job& job, int helpers) {
    std::lock_guard<std::mutex> one_job_at_a_time(run_mutex_);
    if (static_cast<int>(threads_.size()) != helpers) resize(helpers);
    const Clock::time_point start = Clock::now();
    monitor_.job_starting(start);
    job.running.store(helpers);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      ++generation_;
    }
    wake_.notify_all();
    job.work(0);
    // Wait for the helpers to leave the job: spin briefly, then sleep.
    for (int spin = 0; job.running.load() > 0 && spin < kSpinIterations; ++spin) cpu_relax();
    if (job.running.load() > 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return job.running.load() == 0; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = nullptr;
    }
    const Clock::time_point end = Clock::now();
    monitor_.job_finished(end, end - start, helpers);
  }

  bool solo() const { return monitor_.solo(Clock::now()); }

  // Around fork(): no job running and no helper inside the pool's lock, so the child's copy
  // of the pool is in a state it can leave behind (see pool()).
  void hold() {
    run_mutex_.lock();
    mutex_.lock();
  }
  void release() {
    mutex_.unlock();
    run_mutex_.unlock();
  }

 private:
  void resize(int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    stop_ = false;
    // A new thread must compare against the generation as it is now, not as it finds it when
    // it starts: the next job may already have been posted by then.
    const uint64_t now = generation_.load();
    for (int w = 1; w <= helpers; ++w) threads_.emplace_back([this, w, now] { loop(w, now); });
  }

  void loop(int worker, uint64_t seen) {
    for (;;) {
      // Spin briefly for the next job before sleeping.
      for (int spin = 0; generation_.load() == seen && spin < kSpinIterations; ++spin) cpu_relax();
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        seen = generation_.load();
        if (stop_) return;
        job = job_;
      }
      if (job == nullptr) continue;
      job->work(worker);
      if (job->running.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_all();
      }
    }
  }

  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  Job* job_ = nullptr;
  std::vector<std::thread> threads_;
  detail::ShareMonitor monitor_{process_cpu_seconds};
};

// fork() copies only the thread that calls it: in the child the pool's helpers are gone, and
// a job posted to them would wait for ever (multiprocessing's fork start method, a PyTorch
// DataLoader worker). So the pool lives on the heap, and around a fork it is held still
// (hold); the parent then goes on with it, while the child leaves its copy behind, unjoined
// and never freed (its threads and locks belong to the parent), and starts a fresh pool at
// its first parallel loop.
std::atomic<Pool*> g_pool{nullptr};
std::mutex g_pool_creation;

void before_fork() {
  g_pool_creation.lock();
  if (Pool* p = g_pool.load()) p->hold();
}
void after_fork_in_parent() {
  if (Pool* p = g_pool.load()) p->release();
  g_pool_creation.unlock();
}
void after_fork_in_child() {
  g_pool.store(nullptr);  // the old pool is leaked on purpose
  g_pool_creation.unlock();
}

Pool& pool() {
  if (Pool* p = g_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(g_pool_creation);
  static const bool fork_handlers =
      (pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0);
  (void)fork_handlers;
  if (g_pool.load() == nullptr) g_pool.store(new Pool);
  return *g_pool.load();
}

}  // namespace

int num_threads() {
  const int n = g_requested_threads.load();
  return n > 0 ? n : default_threads();
}

namespace detail {
bool inside_parallel_body() { return t_inside_pool_job; }
}  // namespace detail

void set_num_threads(int n) {
  ATTN_CHECK(n >= 0 && n <= kMaxThreads, "set_num_threads: n must be in [0, ", kMaxThreads,
             "] (0: the default), got ", n);
  g_requested_threads.store(n);
}

void parallel_for_workers(int64_t n, const std::function<void(int64_t, int)>& body) {
  if (n <= 0) return;
  const int threads = num_threads();
  const bool serial = threads == 1 || n == 1 || t_inside_pool_job || pool().solo();
  Job job(n, body, serial ? 1 : threads);
  if (serial) {
    // Serial: on this thread, keeping its worker index (nested calls share their caller's).
    const bool nested = t_inside_pool_job;
    job.work(nested ? t_worker : 0);
    t_inside_pool_job = nested;
  } else {
    pool().run(job, threads - 1);
  }
  if (job.failure) std::rethrow_exception(job.failure);
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& body) {
  parallel_for_workers(n, [&](int64_t i, int) { body(i); });
}

}  // namespace attn
