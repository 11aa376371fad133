// How the CLI runs under an MPI launcher (mpirun -np N attn …). mpi_run.cpp when attn is built
// with MPI, mpi_run_absent.cpp when not (then a launched run is refused with a clear error
// instead of N processes each training alone into one directory).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "attn/train.hpp"

namespace attn::cli {

// Starts MPI when a launcher started this process (and attn has it); ends it on destruction.
class MpiScope {
 public:
  MpiScope(int* argc, char*** argv);
  ~MpiScope();
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;
};

// Whether MPI runs in this process (a launcher started it, and attn has MPI).
bool mpi_running();
// This process's rank and the number of processes; 0 and 1 outside a launched job.
int mpi_rank();
int mpi_size();

// After an error on this rank: in a job of several processes, the others may be waiting for
// this one inside a transfer, so the job is ended (MPI_Abort with this status). Returns
// otherwise.
void end_job_after_error(int status);
// The prefix of an error line: "" alone, "rank R of N: " in a job.
std::string error_prefix();

struct DataParallelOptions {
  double timeout_seconds = 300.0;
  int64_t bucket_bytes = int64_t{1} << 20;
};
// attn train's group: null outside a launched job; in one, the data-parallel group over every
// process (an attn::Error when attn was built without MPI). The threads of each process default
// to the cores of its machine over the processes on it.
std::shared_ptr<TrainingGroup> training_group(const DataParallelOptions& options);
// The cores over the processes on this machine, and no more than this process is bound to
// (mpirun binds each process to one core by default when there are two or fewer); at least 1.
// The cores outside a job.
int threads_per_process();
// The cores this process may run on (its affinity mask).
int cores_of_this_process();
// Seconds the last group's gradient sums kept the steps waiting, and their bucket count.
double gradient_wait_seconds();
int64_t gradient_buckets();

// `attn bench ring` (built with MPI only: otherwise the command says how to get it).
void add_bench_ring_command(CLI::App& bench);

}  // namespace attn::cli
