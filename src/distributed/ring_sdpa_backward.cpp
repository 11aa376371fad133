// Ring attention, backward. The fused backward needs, for a block of queries and keys, the
// block's weights P = exp(S − L) and D = rowsum(dO ∘ O) (include/attn/sdpa_backward.hpp);
// with the final O and L of the forward, both are the whole sequence's, so the blocks a rank
// sees add up to the exact gradients:
//   dQ_i  = Σ over the K/V runs query run i sees of its block's dQ    (stays on the rank)
//   dK_j, dV_j = Σ over the query runs that see key run j of their blocks' dK, dV
// The K/V go round the ring as in the forward, and with them an accumulator of their dK/dV:
// at step s rank r adds its blocks' share to the accumulator of rank (r − s) mod N's keys and
// passes it on; after the last step one more hop brings each accumulator home, complete.
// The next K/V are already on their way while the kernel runs; the accumulator can only go
// once this rank's share is in it.
#include <algorithm>

#include "attn/distributed.hpp"
#include "attn/error.hpp"
#include "src/attention/fused.hpp"
#include "src/distributed/ring_common.hpp"

namespace attn::distributed {
namespace {

// A rank's dK and dV packed back to back, as KeysValuesBuffer packs K and V: the
// accumulator that travels with them.
using GradientBuffer = detail::KeysValuesBuffer;

// A contiguous copy of lse's entries for rows [first, first + count): (…, count).
Tensor lse_rows(const Tensor& lse, int64_t first, int64_t count) {
  Shape shape = lse.shape();
  shape.back() = count;
  return lse.as_strided(shape, lse.strides(), first).clone();
}

// One block's gradients, (…, rows, d) for Q and (…, rows, d), (…, rows, dv) for K and V,
// in buffers made once for the longest runs (the kernel writes every element).
struct BlockScratch {
  BlockScratch(const detail::RingLayout& layout, int me, const Tensor& q, const Tensor& k,
               const Tensor& v)
      : q_like(q.shape()), k_like(k.shape()), v_like(v.shape()) {
    int64_t q_rows = 0, k_rows = 0;
    for (size_t r = 0; r < layout.runs.size(); ++r) {
      for (const SequenceRun& run : layout.runs[r]) {
        k_rows = std::max(k_rows, run.length());
        if (r == static_cast<size_t>(me)) q_rows = std::max(q_rows, run.length());
      }
    }
    dq = detail::uninitialized(q.numel() / q.dim(-2) * q_rows);
    dk = detail::uninitialized(k.numel() / k.dim(-2) * k_rows);
    dv = detail::uninitialized(v.numel() / v.dim(-2) * k_rows);
  }
  Shape q_like, k_like, v_like;
  Tensor dq, dk, dv;
};

// This rank's blocks against the K/V the ring holds: dq += their dQ, and their dK, dV added
// to the accumulator of those keys.
void add_blocks(const detail::RingLayout& layout, int me, detail::KeysValuesRing& ring,
                const Tensor& q, const Tensor& out, const Tensor& lse, const Tensor& d_out,
                const SdpaOptions& options, const BlockScratch& scratch, const Tensor& dq,
                const Tensor& dk_sum, const Tensor& dv_sum) {
  for (const detail::VisiblePair& pair : detail::visible_pairs(layout, me, ring.owner(), options)) {
    const Tensor qv = detail::rows_of(q, pair.q_row, pair.q_rows);
    const Tensor kv = detail::rows_of(ring.keys(), pair.k_row, pair.k_rows);
    const Tensor vv = detail::rows_of(ring.values(), pair.k_row, pair.k_rows);
    const Tensor block_lse = lse_rows(lse, pair.q_row, pair.q_rows);
    const Tensor dq_block = detail::rows_view(scratch.dq, scratch.q_like, pair.q_rows);
    const Tensor dk_block = detail::rows_view(scratch.dk, scratch.k_like, pair.k_rows);
    const Tensor dv_block = detail::rows_view(scratch.dv, scratch.v_like, pair.k_rows);
    attn::detail::sdpa_backward_into(
        detail::pair_dims(qv, kv, vv, options, pair), qv, kv, vv,
        detail::rows_of(out, pair.q_row, pair.q_rows), block_lse.data(),
        detail::rows_of(d_out, pair.q_row, pair.q_rows), options, dq_block, dk_block, dv_block);
    ring.poke();
    detail::add_into(detail::rows_of(dq, pair.q_row, pair.q_rows), dq_block);
    detail::add_into(detail::rows_of(dk_sum, pair.k_row, pair.k_rows), dk_block);
    detail::add_into(detail::rows_of(dv_sum, pair.k_row, pair.k_rows), dv_block);
  }
}

void check_forward_results(const Tensor& q, const Tensor& v, const Tensor& out,
                           const Tensor& logsumexp, const Tensor& d_out) {
  const Shape out_shape = attn::detail::with_last_dim(q, v.dim(-1));
  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  ATTN_CHECK(out.defined() && out.shape() == out_shape, "ring_sdpa_backward: out must be ",
             attn::to_string(out_shape), " (what ring_sdpa returned)");
  ATTN_CHECK(d_out.defined() && d_out.shape() == out_shape, "ring_sdpa_backward: d_out must be ",
             attn::to_string(out_shape), ", out's shape");
  ATTN_CHECK(logsumexp.defined() && logsumexp.shape() == lse_shape && logsumexp.is_contiguous(),
             "ring_sdpa_backward: logsumexp must be ", attn::to_string(lse_shape),
             ", contiguous (what ring_sdpa returned)");
}

}  // namespace

SdpaGradients ring_sdpa_backward(const Communicator& comm, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& out, const Tensor& logsumexp,
                                 const Tensor& d_out, const RingOptions& options) {
  std::string problem;
  try {
    check_forward_results(q, v, out, logsumexp, d_out);
  } catch (const Error& e) {
    problem = e.what();
  }
  detail::fail_together(comm, problem, "ring_sdpa_backward");
  const detail::RingLayout layout = detail::check_ring(comm, q, k, v, options);
  const int n = comm.size(), me = comm.rank();
  const Tensor out_c = out.contiguous(), d_out_c = d_out.contiguous();

  SdpaGradients grads{Tensor(q.shape()), Tensor(k.shape()), Tensor(v.shape()), Tensor{}, Tensor{}};
  detail::KeysValuesRing ring(comm, layout, k, v);
  BlockScratch scratch(layout, me, q, k, v);
  // The accumulators this rank adds to and sends on — two, used in turn, so that a send may
  // still be under way while the next step computes — and the one it receives.
  GradientBuffer sum_out[2] = {GradientBuffer(k, v, layout), GradientBuffer(k, v, layout)};
  GradientBuffer sum_in(k, v, layout);
  MPI_Request sum_sent[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  for (int step = 0; step < n; ++step) {
    ring.start_step(step);
    const int owner = ring.owner();
    // The accumulator of owner's keys comes from the previous rank, which had them last step.
    MPI_Request sum_received = MPI_REQUEST_NULL;
    if (step > 0) {
      MPI_Irecv(sum_in.data(), detail::message_count(sum_in.floats(owner), "dK/dV"), MPI_FLOAT,
                layout.previous, detail::kTagGradients, comm.handle(), &sum_received);
    }
    // This step's blocks into a fresh share, once the send from it two steps ago is done.
    GradientBuffer& share = sum_out[step % 2];
    comm.wait({&sum_sent[step % 2], 1}, "ring attention's dK/dV transfer");
    Tensor dk_share = share.keys(owner), dv_share = share.values(owner);
    std::fill(dk_share.data(), dk_share.data() + dk_share.numel(), 0.0f);
    std::fill(dv_share.data(), dv_share.data() + dv_share.numel(), 0.0f);
    add_blocks(layout, me, ring, q, out_c, logsumexp, d_out_c, options.attention, scratch, grads.dq,
               dk_share, dv_share);
    if (step > 0) {
      comm.wait({&sum_received, 1}, "ring attention's dK/dV transfer");
      detail::add_into(dk_share, sum_in.keys(owner));
      detail::add_into(dv_share, sum_in.values(owner));
    }
    if (n > 1) {
      MPI_Isend(share.data(), detail::message_count(share.floats(owner), "dK/dV"), MPI_FLOAT,
                layout.next, detail::kTagGradients, comm.handle(), &sum_sent[step % 2]);
    } else {
      grads.dk.copy_from(dk_share);
      grads.dv.copy_from(dv_share);
    }
    ring.finish_step();
  }
  if (n > 1) {  // the last hop: this rank's own accumulator, complete
    MPI_Request home = MPI_REQUEST_NULL;
    MPI_Irecv(sum_in.data(), detail::message_count(sum_in.floats(me), "dK/dV"), MPI_FLOAT,
              layout.previous, detail::kTagGradients, comm.handle(), &home);
    MPI_Request last[3] = {home, sum_sent[0], sum_sent[1]};
    comm.wait(last, "ring attention's dK/dV transfer");
    grads.dk.copy_from(sum_in.keys(me));
    grads.dv.copy_from(sum_in.values(me));
  }
  return grads;
}

}  // namespace attn::distributed
