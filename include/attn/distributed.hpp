// Past one machine, over MPI: a communicator whose every wait has a deadline, sequence-parallel
// (ring) attention, and the data-parallel group that attn::Trainer sums its gradients with.
// Built when MPI is found (target attn::distributed; docs/distributed.md).
//
// Every call here is collective: each rank of the communicator makes the same calls in the same
// order, with arguments that agree (the same options, shapes that fit together); the checks run
// on every rank alike, so a bad argument is the same attn::Error everywhere, never a hang.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/train.hpp"

namespace attn::distributed {

// MPI_Init_thread on construction (funneled: only the thread that made it calls MPI) and
// MPI_Finalize on destruction; one per process. launched() says whether a launcher (mpirun,
// mpiexec, srun) started this process, from the variables it sets.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  static bool launched();
};

// Thrown when a transfer or collective has not finished within the communicator's timeout: a
// rank died, hangs, or is far behind. The job cannot go on (the other ranks are inside the
// same collective): the caller reports it and ends the job (MPI_Abort).
class Timeout : public Error {
 public:
  using Error::Error;
};

// A communicator (MPI_COMM_WORLD by default) with waits that poll instead of blocking inside
// MPI: a short phase that yields the core between polls, then sleeps that grow to 1 ms, so a
// waiting rank never holds a core another process needs; and a deadline, past which wait
// throws Timeout naming what it waited for.
class Communicator {
 public:
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD, double timeout_seconds = 300.0);
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm handle() const { return comm_; }
  double timeout() const { return timeout_; }
  // Seconds > 0; attn::Error otherwise.
  void set_timeout(double seconds);

  // One poll of the requests: lets MPI move them on (it progresses only inside its calls);
  // true when every one is done.
  bool poll(std::span<MPI_Request> requests) const;
  // Waits for every request (MPI_REQUEST_NULL entries are done); `what` names them in Timeout.
  void wait(std::span<MPI_Request> requests, const std::string& what) const;
  // Starts the element-wise sum over the ranks of values, in place (MPI_Iallreduce, in pieces
  // of at most 2³⁰ elements), appending its requests; wait for them before reading values.
  void start_sum(std::span<float> values, std::vector<MPI_Request>& requests) const;
  // Element-wise sums over the ranks, in place; every rank gets the same bits. `what` names
  // the sum in Timeout's message, as wait's does.
  void sum(std::span<double> values, const std::string& what = "a sum over the ranks") const;
  void sum(std::span<float> values, const std::string& what = "a sum over the ranks") const;
  // Every rank's value, in rank order.
  std::vector<int64_t> gather_all(int64_t value,
                                  const std::string& what = "a gather over the ranks") const;
  // Whether any rank passed true (a collective "did anyone fail?").
  bool any(bool value) const;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  double timeout_;
};

// ---- Ring attention ------------------------------------------------------------------------

// How a sequence of T positions is spread over N ranks (along the T dim of Q, K and V).
//   kContiguous: rank r holds one run, positions [⌊r·T/N⌋, ⌊(r+1)·T/N⌋); causal attention
//                then gives the last rank about 2N−1 times the work of the first. T ≥ N.
//   kZigzag:     the sequence is cut into 2N runs the same way and rank r holds runs r and
//                2N−1−r, back to back: every rank gets about the same causal work (the load
//                balance of ring attention's zigzag layout). T ≥ 2N.
enum class SequenceLayout { kContiguous, kZigzag };
std::string to_string(SequenceLayout layout);  // "contiguous", "zigzag"
SequenceLayout sequence_layout_from_string(const std::string& name);

// A run of positions [begin, end) of the whole sequence.
struct SequenceRun {
  int64_t begin, end;
  int64_t length() const { return end - begin; }
};

// The runs rank `rank` of `ranks` holds, in the order its local rows hold them; attn::Error
// when T is too short for the layout (a rank would hold no position) or rank is out of range.
std::vector<SequenceRun> sequence_runs(int64_t t, int ranks, int rank, SequenceLayout layout);

// A rank's rows of a whole sequence: the dim −2 rows of `full` (…, T, e) that sequence_runs
// gives it, concatenated (a copy). For tests and for callers that hold the whole input.
Tensor shard_sequence(const Tensor& full, int ranks, int rank, SequenceLayout layout);

struct RingOptions {
  // causal, window and scale as for attn::sdpa. An explicit mask or key_lengths is an
  // attn::Error (the ring never holds the whole score matrix to apply one).
  SdpaOptions attention;
  SequenceLayout layout = SequenceLayout::kZigzag;
};

// Self-attention over a sequence spread over the ranks: q (…, Tr, d), k (…, Tr, d) and
// v (…, Tr, dv) are this rank's rows of Q, K and V (Tr as sequence_runs gives for T = the sum
// of every rank's Tr; leading dims as attn::sdpa, GQA included). Returns this rank's rows of
// the output and their logsumexp, equal to attn::sdpa on the whole sequence up to rounding
// (the partial results merge through their logsumexps). K/V travel around the ring with
// non-blocking transfers overlapped with the fused kernel; memory per rank is O(Tr).
SdpaResult ring_sdpa(const Communicator& comm, const Tensor& q, const Tensor& k, const Tensor& v,
                     const RingOptions& options = {});

// Its backward: out and logsumexp as ring_sdpa returned them, d_out = dL/dO for this rank's
// rows. Returns this rank's dQ, dK, dV. dK/dV of a K/V run travel the ring with it, gathering
// each rank's share, and arrive back at their owner.
SdpaGradients ring_sdpa_backward(const Communicator& comm, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& out, const Tensor& logsumexp,
                                 const Tensor& d_out, const RingOptions& options = {});

// ---- Data parallel -------------------------------------------------------------------------

// The group a Trainer sums its gradients with (Trainer::set_group): gradients are cut into
// buckets of about bucket_bytes, counted from the end of the parameter buffer (the backward
// pass finishes the last layers first); each bucket's MPI_Iallreduce starts as soon as the
// backward pass has finished it, and finish_gradients() waits for all of them.
class DataParallel final : public TrainingGroup {
 public:
  static constexpr int64_t kDefaultBucketBytes = int64_t{1} << 20;
  explicit DataParallel(Communicator comm, int64_t bucket_bytes = kDefaultBucketBytes);
  ~DataParallel() override;

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void sum(std::span<double> values, const std::string& what) override { comm_.sum(values, what); }
  void start_gradients(std::span<float> gradients) override;
  void gradients_final_from(int64_t offset) override;
  void finish_gradients() override;
  bool same_on_every_rank(std::span<const float> values) override;

  const Communicator& communicator() const { return comm_; }
  // Seconds spent in finish_gradients (the allreduce time the backward pass did not hide) and
  // buckets started, since construction.
  double wait_seconds() const { return wait_seconds_; }
  int64_t buckets_started() const { return buckets_started_; }

 private:
  void start_bucket(int64_t begin, int64_t end);

  Communicator comm_;
  int64_t bucket_floats_;
  std::span<float> gradients_;
  int64_t pending_end_ = 0;  // [final_from, pending_end_) is final but not yet in a bucket
  std::vector<MPI_Request> requests_;
  double wait_seconds_ = 0.0;
  int64_t buckets_started_ = 0;
};

}  // namespace attn::distributed
