// What the ring attention forward (ring_sdpa.cpp) and backward (ring_sdpa_backward.cpp)
// share: the argument checks every rank runs alike, where each rank's rows sit in the
// sequence, which run of queries sees which run of keys, and the buffers K/V travel in.
// Internal to attn::distributed.
//
// Legend: N ranks, rank r; T the whole sequence, Tr a rank's rows (runs back to back);
// (…) the leading dims of Q (B, H) or of K/V (B, Hkv); d the query/key width, dv V's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "attn/distributed.hpp"
#include "src/reference/checks.hpp"

namespace attn::distributed::detail {

// Message tags: K/V on their way round, dK/dV on theirs.
constexpr int kTagKeysValues = 11;
constexpr int kTagGradients = 12;

// Every rank's runs of the sequence, from the rows each holds.
struct RingLayout {
  int64_t t = 0;                               // the whole sequence
  std::vector<std::vector<SequenceRun>> runs;  // [rank] → its runs, in row order
  std::vector<int64_t> rows;                   // [rank] → Tr
  int next = 0, previous = 0;                  // the ranks K/V go to and come from
};

// A collective verdict on each rank's own checks (problem: its error, "" when they passed):
// when any rank failed, every rank throws — its own error, or that another rank's arguments
// are wrong — so that none is left waiting in a collective. `what` names the call.
void fail_together(const Communicator& comm, const std::string& problem, const char* what);

// Checks q, k, v and the options as attn::sdpa does, and across the ranks: the same leading
// dims, widths and options everywhere, q and k of the same rows, every rank's rows what its
// layout gives it. The same attn::Error on every rank when anything is off.
RingLayout check_ring(const Communicator& comm, const Tensor& q, const Tensor& k, const Tensor& v,
                      const RingOptions& options);

// Rows [first, first + count) of t along dim −2, as a view.
Tensor rows_of(const Tensor& t, int64_t first, int64_t count);

// The attention of a run of queries on a run of keys: nullopt when no query of the run sees
// any key of the other, else the position of the first query counted from the first key
// (AttentionDims::query_position0) under options' causal and window (0 when not causal).
std::optional<int64_t> query_position0(const SequenceRun& queries, const SequenceRun& keys,
                                       const SdpaOptions& options);

// A run of queries of this rank against a run of keys it holds, both as row ranges of the
// local tensors, with the kernel's query_position0 for the pair.
struct VisiblePair {
  int64_t q_row, q_rows, k_row, k_rows, query_position0;
};
// The pairs of rank me's query runs and rank owner's key runs in which some query sees some
// key, in row order.
std::vector<VisiblePair> visible_pairs(const RingLayout& layout, int me, int owner,
                                       const SdpaOptions& options);

// check_attention of the pair's views, with the pair's query position.
attn::detail::AttentionDims pair_dims(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const SdpaOptions& options, const VisiblePair& pair);

// Memory for n floats, not zeroed (the ring's buffers are written before they are read; a
// zero pass over them cost as much as a small step's kernel), as a flat tensor.
Tensor uninitialized(int64_t n);
// A contiguous (…, rows, e) view of a flat buffer from element `offset`: `like`'s shape with
// `rows`.
Tensor rows_view(const Tensor& flat, const Shape& like, int64_t rows, int64_t offset = 0);

// One rank's K and V packed back to back, (…, Tr, d) then (…, Tr, dv), sized for the largest
// rank; keys(owner) and values(owner) see it as rank `owner`'s. Also the dK/dV accumulators.
class KeysValuesBuffer {
 public:
  KeysValuesBuffer(const Tensor& k, const Tensor& v, const RingLayout& layout);
  int64_t floats(int owner) const;  // what rank owner's K and V take
  float* data() { return buffer_.data(); }
  Tensor keys(int owner) const;
  Tensor values(int owner) const;

 private:
  Shape k_shape_, v_shape_;  // with the T dim filled in per owner
  std::vector<int64_t> rows_;
  Tensor buffer_;
};

// The K/V going round the ring. At step s this rank holds the K/V of owner() = (r − s) mod N
// (its own at step 0, read in place); start_step sends them on to the next rank and receives
// the next step's from the previous one, two messages a hop (K, then V); finish_step waits
// for both and makes the received ones the held ones.
class KeysValuesRing {
 public:
  KeysValuesRing(const Communicator& comm, const RingLayout& layout, const Tensor& k,
                 const Tensor& v);
  void start_step(int step);
  int owner() const { return owner_; }
  const Tensor& keys() const { return keys_; }
  const Tensor& values() const { return values_; }
  // Lets MPI move the transfers on (it progresses only inside its calls).
  void poke();
  void finish_step();

 private:
  const Communicator& comm_;
  const RingLayout& layout_;
  std::vector<KeysValuesBuffer> buffers_;  // two, used in turn; none for one rank
  int owner_, incoming_ = -1, arriving_ = 0;
  Tensor keys_, values_;
  std::vector<MPI_Request> requests_;
};

// dst += src for two views of the same shape (rank 2..4, contiguous rows).
void add_into(const Tensor& dst, const Tensor& src);

// An MPI count for n floats; attn::Error past what one message can carry.
int message_count(int64_t n, const char* what);

}  // namespace attn::distributed::detail
