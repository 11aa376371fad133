// Ring attention over the processes of an MPI job: each process holds a share of one long
// sequence, and together they compute causal attention (and its gradients) on the whole of it.
//   mpirun -np 3 build/release/examples/example_05_ring_attention
// It checks its rows against attn::sdpa and sdpa_backward on the whole sequence in one process,
// and exits non-zero when they differ by more than 1e-5 of the largest value.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attn/distributed.hpp"
#include "attn/random.hpp"

namespace {

// max |a − b| / max |b|.
double worst_relative(const attn::Tensor& a, const attn::Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  double worst = 0.0, largest = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::fabs(double{x[i]} - y[i]));
    largest = std::max(largest, std::fabs(double{y[i]}));
  }
  return worst / largest;
}

}  // namespace

int main(int argc, char** argv) {
  attn::distributed::MpiSession mpi(&argc, &argv);
  attn::distributed::Communicator comm;    // MPI_COMM_WORLD; a wait gives up after 300 s
  attn::distributed::RingOptions options;  // the zigzag layout: the same causal work per rank
  options.attention.causal = true;

  // The whole sequence, the same on every rank (seeded): 4 query heads, 2 K/V heads (GQA).
  const attn::Tensor q = attn::rand_normal({1, 4, 1000, 32}, 1);
  const attn::Tensor k = attn::rand_normal({1, 2, 1000, 32}, 2);
  const attn::Tensor v = attn::rand_normal({1, 2, 1000, 32}, 3);
  const attn::Tensor d_out = attn::rand_normal({1, 4, 1000, 32}, 4);
  // This rank's rows of a whole-sequence tensor (…, T, e).
  auto mine = [&](const attn::Tensor& t) {
    return attn::distributed::shard_sequence(t, comm.size(), comm.rank(), options.layout);
  };
  const attn::SdpaResult r = attn::distributed::ring_sdpa(comm, mine(q), mine(k), mine(v), options);
  const attn::SdpaGradients g = attn::distributed::ring_sdpa_backward(
      comm, mine(q), mine(k), mine(v), r.output, r.logsumexp, mine(d_out), options);

  // The check: one process on the whole sequence, this rank's rows of its results.
  const attn::SdpaResult one = attn::sdpa(q, k, v, options.attention);
  const attn::SdpaGradients one_g =
      attn::sdpa_backward(q, k, v, one.output, one.logsumexp, d_out, options.attention);
  const double worst =
      std::max({worst_relative(r.output, mine(one.output)), worst_relative(g.dq, mine(one_g.dq)),
                worst_relative(g.dk, mine(one_g.dk)), worst_relative(g.dv, mine(one_g.dv))});
  std::printf(
      "rank %d of %d: %lld of the 1000 positions; output, dQ, dK, dV within %.1e of "
      "one process\n",
      comm.rank(), comm.size(), static_cast<long long>(r.output.dim(2)), worst);
  return worst <= 1e-5 ? 0 : 1;
}
