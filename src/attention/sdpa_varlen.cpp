// Packed variable-length attention (attn/sdpa_varlen.hpp): each sequence's rows, a (H, L, d)
// view (L its keys in use), are a fused-kernel problem of their own; the forward runs every
// sequence's tasks as one list over the threads, the backward one sequence after another.
// Everything is read and written in place: Q, O and dO once per task; K and V, whose packed rows
// lie H·d floats apart (4 KiB at H = 16, d = 64, all in the same few L1 sets) and are read again
// for every query block, are copied a head at a time by the tasks into the core's cache
// (staged_keys.hpp), not laid out head-major as a whole first (32 MiB written to memory and read
// back at 4096 × 16 × 64: it cost about what it saved). The logsumexp, (H, L) per sequence as the
// kernels write it, is kept sequence by sequence in scratch and laid out (Tq_total, H) at the end.
#include "attn/sdpa_varlen.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/attention/amx_operands.hpp"
#include "src/attention/flash_problem.hpp"
#include "src/attention/fused.hpp"
#include "src/attention/packed_offsets.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/flash_problem.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/finite.hpp"

namespace attn {
namespace {

struct PackedDims {
  int64_t sequences, tq_total, tk_total, heads, kv_heads, d, dv;
};

// The options each sequence's own problem takes: its keys are already cut to those in use.
SdpaOptions per_sequence(const SdpaOptions& options) {
  SdpaOptions each = options;
  each.key_lengths.clear();
  return each;
}

PackedDims check_varlen(const Tensor& q, const Tensor& k, const Tensor& v,
                        const std::vector<int64_t>& cu_q, const std::vector<int64_t>& cu_k,
                        const SdpaOptions& options) {
  ATTN_CHECK(
      q.defined() && k.defined() && v.defined() && q.rank() == 3 && k.rank() == 3 && v.rank() == 3,
      "sdpa_varlen: q, k and v must be packed (total, heads, d)");
  ATTN_CHECK(k.dim(0) == v.dim(0) && k.dim(1) == v.dim(1) && k.dim(2) == q.dim(2),
             "sdpa_varlen: k (", k.shape_string(), ") and v (", v.shape_string(),
             ") must share rows and heads, and k's width must be q's (", q.dim(2), ")");
  ATTN_CHECK(q.dim(1) % k.dim(1) == 0, "sdpa_varlen: k/v heads (", k.dim(1),
             ") must divide q heads (", q.dim(1), ")");
  detail::check_offsets(cu_q, q.dim(0), "sdpa_varlen", "cu_seqlens_q");
  detail::check_offsets(cu_k, k.dim(0), "sdpa_varlen", "cu_seqlens_k");
  ATTN_CHECK(cu_q.size() == cu_k.size(), "sdpa_varlen: cu_seqlens_q has ", cu_q.size(),
             " offsets and cu_seqlens_k ", cu_k.size(), ": one sequence each");
  ATTN_CHECK(options.mask.empty() && options.key_starts.empty() && !options.return_weights &&
                 !options.return_mask_gradient,
             "sdpa_varlen: masks, key_starts and weights are not taken: the offsets say where "
             "each sequence's keys are");
  if (!options.key_lengths.empty()) {  // seqused_k: the keys in use at the start of each slot
    ATTN_CHECK(options.key_lengths.size() + 1 == cu_k.size(), "sdpa_varlen: key_lengths has ",
               options.key_lengths.size(), " entries for ", cu_k.size() - 1,
               " sequences: one each");
    for (size_t s = 0; s + 1 < cu_k.size(); ++s) {
      const int64_t used = options.key_lengths[s], slot = cu_k[s + 1] - cu_k[s];
      ATTN_CHECK(used >= 0 && used <= slot, "sdpa_varlen: key_lengths[", s, "] = ", used,
                 " must be from 0 to the ", slot, " key rows sequence ", s, " has");
    }
  }
  // The options against the heads and widths (scale, window, the variants' counts), before a
  // sequence without keys reads its sinks.
  detail::check_attention(Shape{1, q.dim(1), 1, q.dim(2)}, Shape{1, k.dim(1), 1, k.dim(2)},
                          Shape{1, v.dim(1), 1, v.dim(2)}, per_sequence(options));
  return {static_cast<int64_t>(cu_q.size()) - 1,
          q.dim(0),
          k.dim(0),
          q.dim(1),
          k.dim(1),
          q.dim(2),
          v.dim(2)};
}

// Rows [first, first + length) of a packed (total, heads, width) tensor, in place: (heads,
// length, width) with rows heads·width floats apart.
Tensor packed_view(const Tensor& packed, int64_t first, int64_t length) {
  return packed.slice(first, length).permute({1, 0, 2});
}

// The key rows sequence s attends to: the first key_lengths[s] of its slot when given
// (FlashAttention's seqused_k: a cache slot longer than what it holds), else all of it.
int64_t keys_used(const std::vector<int64_t>& cu_k, const SdpaOptions& options, int64_t s) {
  const int64_t slot = cu_k[static_cast<size_t>(s) + 1] - cu_k[static_cast<size_t>(s)];
  return options.key_lengths.empty() ? slot : options.key_lengths[static_cast<size_t>(s)];
}

}  // namespace

SdpaResult sdpa_varlen(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                       const std::vector<int64_t>& cu_q, const std::vector<int64_t>& cu_k,
                       const SdpaOptions& options_in) {
  const PackedDims dims = check_varlen(q_in, k_in, v_in, cu_q, cu_k, options_in);
  const SdpaOptions options = per_sequence(options_in);
  // On AMX tiles the packing rounds Q, K and V as it reads them (amx_operands.hpp).
  const bool on_amx = detail::products_on_amx(options);
  const Tensor q = detail::operand_rows_for(q_in, options, on_amx),
               k = detail::operand_rows_for(k_in, options, on_amx),
               v = detail::operand_rows_for(v_in, options, on_amx);
  // Not zeroed (16 MiB at 4096 × 16 × 64, 5 % of eight packed sequences' time): the kernels
  // write every row of a sequence that has keys, and the rows of one without are zeroed below.
  SdpaResult result{Tensor::uninitialized({dims.tq_total, dims.heads, dims.dv}), Tensor{},
                    Tensor::uninitialized({dims.tq_total, dims.heads})};
  std::vector<float> lse_by_sequence(static_cast<size_t>(dims.tq_total * dims.heads));
  std::atomic<bool> non_finite{false};
  std::vector<kernels::FlashProblem> problems;  // one per sequence that has queries and keys
  for (int64_t s = 0; s < dims.sequences; ++s) {
    const int64_t q0 = cu_q[s], lq = cu_q[s + 1] - q0, k0 = cu_k[s],
                  lk = keys_used(cu_k, options_in, s);
    if (lq == 0) continue;
    if (lk == 0) {  // no key at all: zeros, logsumexp +inf, or the sink
      float* rows = result.output.data() + q0 * dims.heads * dims.dv;
      std::fill(rows, rows + lq * dims.heads * dims.dv, 0.0f);
      for (int64_t h = 0; h < dims.heads; ++h) {
        const float l = options.sinks.empty() ? INFINITY : options.sinks[static_cast<size_t>(h)];
        std::fill_n(lse_by_sequence.data() + q0 * dims.heads + h * lq, lq, l);
      }
      continue;
    }
    const Tensor q_s = packed_view(q, q0, lq), k_s = packed_view(k, k0, lk),
                 v_s = packed_view(v, k0, lk);
    const detail::AttentionDims dims_s = detail::check_attention(q_s, k_s, v_s, options);
    const Tensor q4 = detail::as_rank4(q_s), k4 = detail::as_rank4(k_s), v4 = detail::as_rank4(v_s);
    if (!on_amx && detail::decode_applies(dims_s, q4, k4, v4, options)) {
      // A decode step (a few queries at the end of its keys): the decode kernel, whose tasks
      // split the keys over the threads, as attn::sdpa gives it alone; its rows packed here.
      const SdpaResult one = detail::decode(dims_s, q4, k4, v4, options, "sdpa_varlen");
      packed_view(result.output, q0, lq).copy_from(one.output.select(0));
      std::copy_n(one.logsumexp.data(), dims.heads * lq, lse_by_sequence.data() + q0 * dims.heads);
      continue;
    }
    problems.push_back(detail::flash_problem(
        dims_s, q4, k4, v4, detail::as_rank4(packed_view(result.output, q0, lq)), Tensor{}, options,
        lse_by_sequence.data() + q0 * dims.heads));
  }
  {
    const detail::PhaseScope clock(Phase::kAttention);
    detail::forward_tasks(problems, &non_finite, on_amx);  // every sequence's tasks in one list
  }
  if (non_finite.load()) detail::check_finite_qkv("sdpa_varlen", q, k, v);  // throws, naming it
  // (H, L) per sequence -> (Tq_total, H).
  float* lse = result.logsumexp.data();
  for (int64_t s = 0; s < dims.sequences; ++s) {
    const int64_t q0 = cu_q[s], lq = cu_q[s + 1] - q0;
    for (int64_t h = 0; h < dims.heads; ++h)
      for (int64_t i = 0; i < lq; ++i)
        lse[(q0 + i) * dims.heads + h] =
            lse_by_sequence[static_cast<size_t>(q0 * dims.heads + h * lq + i)];
  }
  for (float x : result.logsumexp.to_vector()) {
    ATTN_CHECK(!std::isnan(x), "sdpa_varlen: the scores overflow float32; scale q or k down");
  }
  return result;
}

SdpaGradients sdpa_varlen_backward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                   const Tensor& out_in, const Tensor& logsumexp,
                                   const Tensor& d_out_in, const std::vector<int64_t>& cu_q,
                                   const std::vector<int64_t>& cu_k,
                                   const SdpaOptions& options_in) {
  const PackedDims dims = check_varlen(q_in, k_in, v_in, cu_q, cu_k, options_in);
  const SdpaOptions options = per_sequence(options_in);
  const Shape out_shape{dims.tq_total, dims.heads, dims.dv};
  ATTN_CHECK(out_in.defined() && out_in.shape() == out_shape && d_out_in.defined() &&
                 d_out_in.shape() == out_shape,
             "sdpa_varlen_backward: out and d_out must be ", to_string(out_shape));
  ATTN_CHECK(logsumexp.defined() && logsumexp.shape() == Shape({dims.tq_total, dims.heads}),
             "sdpa_varlen_backward: logsumexp must be (", dims.tq_total, ", ", dims.heads,
             "), what sdpa_varlen returned");
  // On AMX tiles the packing rounds Q, K, V and dO as it reads them (amx_operands.hpp).
  const bool on_amx = detail::products_on_amx(options);
  const Tensor q = detail::operand_rows_for(q_in, options, on_amx),
               k = detail::operand_rows_for(k_in, options, on_amx),
               v = detail::operand_rows_for(v_in, options, on_amx), out = out_in.contiguous(),
               d_out = detail::as_product_operand(d_out_in, options, on_amx).contiguous(),
               lse_in = logsumexp.contiguous();
  for (float x : lse_in.to_vector()) {
    ATTN_CHECK(!std::isnan(x) && x != -INFINITY, "sdpa_varlen_backward: logsumexp holds ", x,
               "; pass the logsumexp sdpa_varlen returned with this output");
  }
  // Packed, as q, k, v. Not zeroed (48 MiB at 4096 × 16 × 64): the backward of a sequence
  // writes all of its rows, and a sequence without queries or without keys is zeroed below.
  SdpaGradients grads{Tensor::uninitialized(q.shape()), Tensor::uninitialized(k_in.shape()),
                      Tensor::uninitialized(v_in.shape()), Tensor{}, Tensor{}};
  auto zero_rows = [](Tensor& packed, int64_t first, int64_t count) {
    const int64_t row = packed.numel() / packed.dim(0);
    std::fill_n(packed.data() + first * row, count * row, 0.0f);
  };
  // (Tq_total, H) -> (H, L) per sequence, as the kernels read it.
  std::vector<float> lse_by_sequence(static_cast<size_t>(dims.tq_total * dims.heads));
  for (int64_t s = 0; s < dims.sequences; ++s) {
    const int64_t q0 = cu_q[s], lq = cu_q[s + 1] - q0;
    for (int64_t h = 0; h < dims.heads; ++h)
      for (int64_t i = 0; i < lq; ++i)
        lse_by_sequence[static_cast<size_t>(q0 * dims.heads + h * lq + i)] =
            lse_in.data()[(q0 + i) * dims.heads + h];
  }
  std::atomic<bool> non_finite{false};
  for (int64_t s = 0; s < dims.sequences; ++s) {
    const int64_t q0 = cu_q[s], lq = cu_q[s + 1] - q0, k0 = cu_k[s],
                  lk = keys_used(cu_k, options_in, s), unused = cu_k[s + 1] - k0 - lk;
    zero_rows(grads.dk, k0 + lk, unused);  // keys past those in use: no output read them
    zero_rows(grads.dv, k0 + lk, unused);
    if (lq == 0 || lk == 0) {  // nothing attends: the gradients are 0
      zero_rows(grads.dq, q0, lq);
      zero_rows(grads.dk, k0, lk);
      zero_rows(grads.dv, k0, lk);
      continue;
    }
    const Tensor q_s = packed_view(q, q0, lq), k_s = packed_view(k, k0, lk),
                 v_s = packed_view(v, k0, lk);
    detail::sdpa_backward_into(detail::check_attention(q_s, k_s, v_s, options), q_s, k_s, v_s,
                               packed_view(out, q0, lq), lse_by_sequence.data() + q0 * dims.heads,
                               packed_view(d_out, q0, lq), options, packed_view(grads.dq, q0, lq),
                               packed_view(grads.dk, k0, lk), packed_view(grads.dv, k0, lk),
                               &non_finite);
  }
  if (non_finite.load()) {
    detail::check_finite_qkv("sdpa_varlen_backward", q, k, v);
    detail::check_finite(out, "sdpa_varlen_backward", "out");
    detail::check_finite(d_out, "sdpa_varlen_backward", "d_out");
  }
  if (!options.sinks.empty()) {  // the packed rows as (1, H, Tq_total, ·) views; dO as given,
    // not rounded, as sdpa_backward takes it
    grads.dsinks =
        detail::sink_gradients(detail::as_rank4(out.permute({1, 0, 2})),
                               detail::as_rank4(d_out_in.contiguous().permute({1, 0, 2})),
                               detail::as_rank4(lse_in.permute({1, 0})).select(0), options.sinks);
  }
  return grads;
}

}  // namespace attn
