// Communicator: MPI calls whose waits poll with a deadline (include/attn/distributed.hpp), and
// the process's MPI session.
//
// Why not MPI's blocking calls: Open MPI's MPI_Wait and blocking collectives busy-poll, a core
// at 100 % for as long as a peer is late — the spin-wait our thread pool avoids (a rank that
// waits while its peer computes on the other core would take that core's time) — and they
// never give up: a rank that died silently or hangs leaves the others waiting for ever. Here
// every wait is MPI_Testall in a loop: for the first millisecond the core is yielded between
// polls (a short transfer finishes within it), then the waiter sleeps, 10 µs at first and
// doubling to 1 ms, until the deadline. MPI makes progress only inside its calls, so the
// polls also move the transfers on.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <thread>

#include "attn/distributed.hpp"
#include "attn/error.hpp"
#include "attn/mpi_launcher.hpp"

namespace attn::distributed {
namespace {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, static_cast<size_t>(length)));
}

// MPI counts are int: longer arrays go in pieces of at most this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

template <class T>
void start_sums(MPI_Comm comm, std::span<T> values, MPI_Datatype type,
                std::vector<MPI_Request>& requests) {
  for (size_t at = 0; at < values.size(); at += kMaxCount) {
    const int count = static_cast<int>(std::min<size_t>(kMaxCount, values.size() - at));
    requests.emplace_back();
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, values.data() + at, count, type, MPI_SUM, comm,
                             &requests.back()),
              "MPI_Iallreduce");
  }
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (attn::Error) instead of ending the process inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool MpiSession::launched() { return started_by_mpi_launcher(); }

Communicator::Communicator(MPI_Comm comm, double timeout_seconds) : comm_(comm) {
  set_timeout(timeout_seconds);
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

void Communicator::set_timeout(double seconds) {
  ATTN_CHECK(std::isfinite(seconds) && seconds > 0.0,
             "Communicator: the timeout must be a number of seconds > 0, got ", seconds);
  timeout_ = seconds;
}

void Communicator::wait(std::span<MPI_Request> requests, const std::string& what) const {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  std::chrono::microseconds pause{10};
  while (true) {
    if (poll(requests)) return;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      throw Timeout(detail::concat("rank ", rank_, " of ", size_, ": ", what,
                                   " did not finish within ", timeout_,
                                   " s; a rank died, hangs or is far behind"));
    }
    if (now - start < std::chrono::milliseconds(1)) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

bool Communicator::poll(std::span<MPI_Request> requests) const {
  int done = 0;
  check_mpi(
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall");
  return done != 0;
}

void Communicator::start_sum(std::span<float> values, std::vector<MPI_Request>& requests) const {
  start_sums(comm_, values, MPI_FLOAT, requests);
}

void Communicator::sum(std::span<double> values, const std::string& what) const {
  std::vector<MPI_Request> requests;
  start_sums(comm_, values, MPI_DOUBLE, requests);
  wait(requests, what);
}

void Communicator::sum(std::span<float> values, const std::string& what) const {
  std::vector<MPI_Request> requests;
  start_sum(values, requests);
  wait(requests, what);
}

std::vector<int64_t> Communicator::gather_all(int64_t value, const std::string& what) const {
  std::vector<int64_t> all(static_cast<size_t>(size_));
  MPI_Request request;
  check_mpi(MPI_Iallgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm_, &request),
            "MPI_Iallgather");
  wait({&request, 1}, what);
  return all;
}

bool Communicator::any(bool value) const {
  for (int64_t v : gather_all(value ? 1 : 0)) {
    if (v != 0) return true;
  }
  return false;
}

}  // namespace attn::distributed
