// The MPI glue of the CLI (mpi_run.hpp), when attn is built with MPI.
#include "mpi_run.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include "attn/distributed.hpp"
#include "attn/error.hpp"

namespace attn::cli {
namespace {

std::optional<distributed::MpiSession> g_session;
std::shared_ptr<distributed::DataParallel> g_group;

}  // namespace

MpiScope::MpiScope(int* argc, char*** argv) {
  if (distributed::MpiSession::launched()) g_session.emplace(argc, argv);
}

MpiScope::~MpiScope() {
  g_group.reset();
  g_session.reset();
}

bool mpi_running() { return g_session.has_value(); }

int mpi_rank() {
  if (!g_session) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpi_size() {
  if (!g_session) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void end_job_after_error(int status) {
  if (mpi_size() > 1) MPI_Abort(MPI_COMM_WORLD, status);
}

std::string error_prefix() {
  if (mpi_size() <= 1) return "";
  return "rank " + std::to_string(mpi_rank()) + " of " + std::to_string(mpi_size()) + ": ";
}

std::shared_ptr<TrainingGroup> training_group(const DataParallelOptions& options) {
  if (!g_session) return nullptr;
  g_group = std::make_shared<distributed::DataParallel>(
      distributed::Communicator(MPI_COMM_WORLD, options.timeout_seconds), options.bucket_bytes);
  return g_group;
}

int cores_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int threads_per_process() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!g_session) return cores;
  // mpirun binds each process to a core by default when there are at most two: then that
  // core is all this process may use.
  const int bound = cores_of_this_process();
  // The processes on this machine: those that share its memory.
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int here = 1;
  MPI_Comm_size(local, &here);
  MPI_Comm_free(&local);
  return std::max(1, std::min(bound, cores / here));
}

double gradient_wait_seconds() { return g_group ? g_group->wait_seconds() : 0.0; }
int64_t gradient_buckets() { return g_group ? g_group->buckets_started() : 0; }

}  // namespace attn::cli
