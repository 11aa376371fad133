// Ring attention, forward. Each rank keeps its rows of Q; the K/V rows travel round the ring,
// one hop a step, so after N steps every query has met every key (Liu et al., "Ring Attention
// with Blockwise Transformers", 2023). At step s rank r holds the K/V of rank (r − s) mod N,
// and runs the fused kernel for each of its query runs against each of their key runs that it
// can see (ring_common.hpp's query_position0: the kernel's causal mask, shifted by where the
// two runs sit in the sequence). Each such call gives a partial output O_p and logsumexp L_p
// of the same queries over other keys; two partials merge exactly:
//   L = max + log(exp(L_a − max) + exp(L_b − max))
//   O = exp(L_a − L)·O_a + exp(L_b − L)·O_b
// (the softmax over the union of the keys, from the two normalised halves). The next step's
// K/V is already on its way (MPI_Isend/MPI_Irecv posted before the kernel runs), and the
// transfers are polled between the kernel calls, since MPI moves data only inside its calls.
//
// Cost per rank and step: the kernel on its share of the visible blocks — with the zigzag
// layout two of its four run pairs, the same on every rank — plus one message of Tr·(d + dv)
// floats per K/V head and batch; the merge reads and writes O once per visible pair.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attn/distributed.hpp"
#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/attention/fused.hpp"
#include "src/distributed/ring_common.hpp"

namespace attn::distributed {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// (…, Tr) seen as (…, Tr, 1), so that the row views of ring_common apply to it.
Tensor as_column(const Tensor& lse) {
  Shape shape = lse.shape(), strides = lse.strides();
  shape.push_back(1);
  strides.push_back(1);
  return lse.as_strided(shape, strides, 0);
}

// Merges a partial result (out, lse) of some queries into the running one (acc_out,
// acc_lse) of the same queries: all four rank-4 views, lse (…, rows, 1). A running logsumexp
// of −inf holds no key yet; a partial one of +inf saw none (attn::sdpa's convention).
void merge_partial(const Tensor& acc_out, const Tensor& acc_lse, const Tensor& out,
                   const Tensor& lse) {
  const Tensor ao = attn::detail::as_rank4(acc_out), al = attn::detail::as_rank4(acc_lse);
  const Tensor po = attn::detail::as_rank4(out), pl = attn::detail::as_rank4(lse);
  const int64_t heads = ao.dim(1), rows = ao.dim(2), width = ao.dim(3);
  parallel_for(ao.dim(0) * heads, [&](int64_t bh) {
    const int64_t b = bh / heads, h = bh % heads;
    for (int64_t i = 0; i < rows; ++i) {
      const float l_b = pl.data()[b * pl.strides()[0] + h * pl.strides()[1] + i * pl.strides()[2]];
      if (l_b == kInf) continue;  // the partial saw no key
      float& l_a = const_cast<float*>(
          al.data())[b * al.strides()[0] + h * al.strides()[1] + i * al.strides()[2]];
      float* o_a = const_cast<float*>(ao.data()) + b * ao.strides()[0] + h * ao.strides()[1] +
                   i * ao.strides()[2];
      const float* o_b =
          po.data() + b * po.strides()[0] + h * po.strides()[1] + i * po.strides()[2];
      if (l_a == -kInf) {
        for (int64_t e = 0; e < width; ++e) o_a[e] = o_b[e];
        l_a = l_b;
        continue;
      }
      const float top = std::max(l_a, l_b);
      const float w_a = std::exp(l_a - top), w_b = std::exp(l_b - top);
      const float total = w_a + w_b;
      for (int64_t e = 0; e < width; ++e) o_a[e] = (w_a * o_a[e] + w_b * o_b[e]) / total;
      l_a = top + std::log(total);
    }
  });
}

}  // namespace

SdpaResult ring_sdpa(const Communicator& comm, const Tensor& q, const Tensor& k, const Tensor& v,
                     const RingOptions& options) {
  const detail::RingLayout layout = detail::check_ring(comm, q, k, v, options);
  const int n = comm.size(), me = comm.rank();

  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  SdpaResult result{Tensor(attn::detail::with_last_dim(q, v.dim(-1))), Tensor{},
                    Tensor::full(lse_shape, -kInf)};
  const Tensor lse_column = as_column(result.logsumexp);

  // One buffer for the partial results of every pair (a run has at most max_rows rows).
  int64_t max_rows = 0;
  for (const SequenceRun& run : layout.runs[static_cast<size_t>(me)]) {
    max_rows = std::max(max_rows, run.length());
  }
  const Shape out_like = attn::detail::with_last_dim(q, v.dim(-1));
  Shape lse_like = q.shape();  // (…, rows, 1): the rows of a logsumexp column
  lse_like.back() = 1;
  const Tensor part_out = detail::uninitialized(result.output.numel() / q.dim(-2) * max_rows);
  const Tensor part_lse = detail::uninitialized(result.logsumexp.numel() / q.dim(-2) * max_rows);

  detail::KeysValuesRing ring(comm, layout, k, v);
  for (int step = 0; step < n; ++step) {
    ring.start_step(step);
    for (const detail::VisiblePair& pair :
         detail::visible_pairs(layout, me, ring.owner(), options.attention)) {
      const Tensor qv = detail::rows_of(q, pair.q_row, pair.q_rows);
      const Tensor kv = detail::rows_of(ring.keys(), pair.k_row, pair.k_rows);
      const Tensor vv = detail::rows_of(ring.values(), pair.k_row, pair.k_rows);
      const Tensor out = detail::rows_view(part_out, out_like, pair.q_rows);
      Tensor lse = detail::rows_view(part_lse, lse_like, pair.q_rows);
      attn::detail::sdpa_into(detail::pair_dims(qv, kv, vv, options.attention, pair), qv, kv, vv,
                              options.attention, out, lse.data());
      ring.poke();
      merge_partial(detail::rows_of(result.output, pair.q_row, pair.q_rows),
                    detail::rows_of(lse_column, pair.q_row, pair.q_rows), out, lse);
    }
    ring.finish_step();
  }
  // Every query sees at least itself; a logsumexp still −inf or NaN means scores past float's
  // range or an input that is not finite — on some rank, so all of them say so.
  bool bad = false;
  for (const float l : result.logsumexp.to_vector()) bad = bad || !std::isfinite(l);
  ATTN_CHECK(!comm.any(bad), "ring_sdpa: the scores overflow float32 or an input is not finite ",
             "(on some rank); scale q or k down");
  return result;
}

}  // namespace attn::distributed
