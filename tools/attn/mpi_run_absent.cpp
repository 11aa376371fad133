// The MPI glue of the CLI when attn is built without MPI (mpi_run.hpp).
#include "attn/error.hpp"
#include "attn/mpi_launcher.hpp"
#include "mpi_run.hpp"

namespace attn::cli {
namespace {

constexpr char kWithout[] =
    "this attn was built without MPI; install Open MPI (libopenmpi-dev, openmpi-bin: "
    "scripts/bootstrap does) and build again";

}  // namespace

MpiScope::MpiScope(int*, char***) {}
MpiScope::~MpiScope() = default;
bool mpi_running() { return false; }
int mpi_rank() { return 0; }
int mpi_size() { return 1; }
void end_job_after_error(int) {}
std::string error_prefix() { return ""; }

std::shared_ptr<TrainingGroup> training_group(const DataParallelOptions&) {
  ATTN_CHECK(!distributed::started_by_mpi_launcher(), "started by mpirun, but ", kWithout);
  return nullptr;
}

int threads_per_process() { return 0; }  // the library's default
double gradient_wait_seconds() { return 0.0; }
int64_t gradient_buckets() { return 0; }

void add_bench_ring_command(CLI::App& bench) {
  // Any flags are taken, so that a command line written for an MPI build gets this reason.
  CLI::App* ring = bench.add_subcommand("ring", "ring attention over MPI (not in this build)");
  ring->allow_extras();
  ring->callback([] { throw Error(std::string("attn bench ring: ") + kWithout); });
}

}  // namespace attn::cli
