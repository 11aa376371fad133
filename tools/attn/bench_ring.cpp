// attn bench ring: ring attention over the processes of an MPI job (mpirun -np N attn bench
// ring), forward and backward, next to one process running attn::sdpa on the whole sequence
// with every core, in the same run: while rank 0 times the single process, the other ranks
// wait asleep (Communicator's waits), so the one process has the machine to itself.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "attn/distributed.hpp"
#include "attn/error.hpp"
#include "attn/random.hpp"
#include "attn/threads.hpp"
#include "bench_util.hpp"
#include "common.hpp"
#include "mpi_run.hpp"

namespace attn::cli {
namespace {

struct RingBenchArgs {
  std::vector<int64_t> seq{16384};
  int64_t heads = 16, kv_heads = 0, head_dim = 64;
  bool causal = false, backward = false;
  std::string layout = "zigzag";
  int runs = 3, threads = 0;
  double timeout = 600.0;
};

// Median ms of `runs` calls of fn on every rank together, after one call to warm up: each
// call starts after a barrier and is timed on rank 0 until a barrier after it, so the slowest
// rank counts. Every rank makes the same number of calls (fn is collective), so the warm-up
// is a count, not median_ms's time that each rank would measure for itself.
template <class Fn>
double ring_ms(const distributed::Communicator& comm, int runs, Fn&& fn) {
  fn();
  return timed_median_ms(runs, [&] {
    comm.any(false);
    fn();
    comm.any(false);
  });
}

// A table cell: milliseconds, or "-" when not measured (< 0).
std::string cell(double ms) {
  char text[32] = "-";
  if (ms >= 0.0) std::snprintf(text, sizeof text, "%.1f", ms);
  return text;
}

std::string ratio(double ms, double baseline_ms) {
  char text[32] = "-";
  if (ms >= 0.0 && baseline_ms > 0.0) std::snprintf(text, sizeof text, "%.3f", ms / baseline_ms);
  return text;
}

void run_bench_ring(const RingBenchArgs& a) {
  ATTN_CHECK(mpi_running(), "attn bench ring runs under an MPI launcher: mpirun --bind-to none ",
             "-np N attn bench ring …");
  const distributed::Communicator comm(MPI_COMM_WORLD, a.timeout);
  const int n = comm.size(), me = comm.rank();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The one-process baseline needs every core: a rank mpirun bound to one would time half a
  // machine (mpirun binds each rank to a core by default for -np 2 or less), so then it is
  // left out rather than timed wrong.
  const bool baseline = !comm.any(cores_of_this_process() < cores);
  const int ring_threads = a.threads > 0 ? a.threads : threads_per_process();
  const int64_t kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  ATTN_CHECK(a.heads % kv_heads == 0, "--kv-heads (", kv_heads, ") must divide --heads (", a.heads,
             ")");
  distributed::RingOptions options;
  options.attention.causal = a.causal;
  options.layout = distributed::sequence_layout_from_string(a.layout);
  if (me == 0) {
    std::printf(
        "ring attention: %d processes x %d threads (%s layout) against one process with %d "
        "threads; H = %lld, H_kv = %lld, d = %lld, %s; median of %d runs\n",
        n, ring_threads, a.layout.c_str(), cores, static_cast<long long>(a.heads),
        static_cast<long long>(kv_heads), static_cast<long long>(a.head_dim),
        a.causal ? "causal" : "not causal", a.runs);
    if (!baseline) {
      std::printf(
          "(no one-process baseline: a rank is bound to part of the machine; run mpirun "
          "with --bind-to none to measure it)\n");
    }
    std::printf("%7s %12s %12s %7s %12s %12s %7s %9s\n", "seq", "ring fwd ms", "one fwd ms",
                "ratio", "ring bwd ms", "one bwd ms", "ratio", "useful");
  }
  for (const int64_t t : a.seq) {
    const Tensor q = rand_normal({1, a.heads, t, a.head_dim}, 1);
    const Tensor k = rand_normal({1, kv_heads, t, a.head_dim}, 2);
    const Tensor v = rand_normal({1, kv_heads, t, a.head_dim}, 3);
    const Tensor d_out = rand_normal({1, a.heads, t, a.head_dim}, 4);
    const Tensor q_r = distributed::shard_sequence(q, n, me, options.layout);
    const Tensor k_r = distributed::shard_sequence(k, n, me, options.layout);
    const Tensor v_r = distributed::shard_sequence(v, n, me, options.layout);
    const Tensor d_r = distributed::shard_sequence(d_out, n, me, options.layout);

    set_num_threads(ring_threads);
    SdpaResult ring;
    const double ring_fwd =
        ring_ms(comm, a.runs, [&] { ring = distributed::ring_sdpa(comm, q_r, k_r, v_r, options); });
    double ring_bwd = -1.0;
    if (a.backward) {
      ring_bwd = ring_ms(comm, a.runs, [&] {
        distributed::ring_sdpa_backward(comm, q_r, k_r, v_r, ring.output, ring.logsumexp, d_r,
                                        options);
      });
    }
    // The single process: rank 0 with every core, the others asleep in the barrier.
    double one_fwd = -1.0, one_bwd = -1.0;
    if (me == 0 && baseline) {
      set_num_threads(cores);
      SdpaResult one;
      one_fwd = median_ms(a.runs, [&] { one = sdpa(q, k, v, options.attention); });
      if (a.backward) {
        one_bwd = median_ms(a.runs, [&] {
          sdpa_backward(q, k, v, one.output, one.logsumexp, d_out, options.attention);
        });
      }
    }
    comm.any(false);
    if (me == 0) {
      const double flops = a.causal ? 2.0 * a.heads * double(t) * double(t + 1) * a.head_dim
                                    : 4.0 * a.heads * double(t) * double(t) * a.head_dim;
      std::printf("%7lld %12s %12s %7s %12s %12s %7s %6.1f GF\n", static_cast<long long>(t),
                  cell(ring_fwd).c_str(), cell(one_fwd).c_str(), ratio(ring_fwd, one_fwd).c_str(),
                  cell(ring_bwd).c_str(), cell(one_bwd).c_str(), ratio(ring_bwd, one_bwd).c_str(),
                  flops / ring_fwd / 1e6);
      std::fflush(stdout);
    }
  }
}

}  // namespace

void add_bench_ring_command(CLI::App& bench) {
  auto args = std::make_shared<RingBenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "ring",
      "Ring attention over the processes of an MPI job: mpirun -np N attn bench ring. Each rank\n"
      "holds its rows of a random sequence (B = 1); the forward (and with --backward the\n"
      "backward) is timed against attn::sdpa on the whole sequence in one process using every\n"
      "core, in the same run (ratio = ring / one process; below 1 is faster) — with mpirun\n"
      "--bind-to none; ranks bound to a core each (mpirun's default for -np 2) leave it out.\n"
      "'useful' is the ring forward's GFLOP/s over the positions that attend.");
  RingBenchArgs& a = *args;
  cmd->add_option("--seq", a.seq, "sequence lengths (comma-separated)")
      ->delimiter(',')
      ->check(in_range(2, int64_t{1} << 22))
      ->capture_default_str();
  cmd->add_option("--heads", a.heads, "query heads")->check(positive())->capture_default_str();
  cmd->add_option("--kv-heads", a.kv_heads, "K/V heads (default: --heads)")->check(positive());
  cmd->add_option("--head-dim", a.head_dim, "d")->check(in_range(1, 1024))->capture_default_str();
  cmd->add_flag("--causal", a.causal, "causal attention");
  cmd->add_flag("--backward", a.backward, "also time the backward pass");
  cmd->add_option("--layout", a.layout, "zigzag or contiguous")
      ->check(CLI::IsMember({"zigzag", "contiguous"}))
      ->capture_default_str();
  cmd->add_option("--runs", a.runs, "timed runs per figure (the median)")
      ->check(in_range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--threads", a.threads,
                  "threads per process for the ring (default: the cores over the processes)")
      ->check(in_range(1, kMaxThreads));
  cmd->add_option("--mpi-timeout", a.timeout, "seconds a rank waits for the others")
      ->check(positive())
      ->capture_default_str();
  cmd->callback([args] { run_bench_ring(*args); });
}

}  // namespace attn::cli
