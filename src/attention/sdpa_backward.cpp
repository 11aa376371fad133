// The fused attention backward: argument checks, the task partition over (batch, K/V head),
// per-worker scratch. The SIMD work is in src/kernels/flash_backward.cpp.
#include "attn/sdpa_backward.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/attention/amx_operands.hpp"
#include "src/attention/flash_problem.hpp"
#include "src/attention/fused.hpp"
#include "src/attention/staged_keys.hpp"
#include "src/core/kept_buffer.hpp"
#include "src/core/machine_cores.hpp"
#include "src/core/memory_limit.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/flash_backward.hpp"
#include "src/kernels/prefetch.hpp"
#include "src/reference/finite.hpp"
#include "src/reference/mask_gradient.hpp"

namespace attn {
namespace {

void check_gradient_view(const Tensor& grad, const Tensor& input, const char* name) {
  ATTN_CHECK(grad.shape() == input.shape() && grad.strides().back() == 1, "sdpa_backward: the ",
             name, " view ", grad.shape_string(), " must be ", input.shape_string(),
             " with contiguous rows");
}

}  // namespace

namespace detail {

// The logsumexp must be the forward's: finite, or +inf for a row that sees no key.
void check_logsumexp(const Tensor& logsumexp, const Shape& expected) {
  ATTN_CHECK(logsumexp.defined() && logsumexp.shape() == expected,
             "sdpa_backward: logsumexp must be ", to_string(expected),
             " (what attn::sdpa returned), got ",
             logsumexp.defined() ? logsumexp.shape_string() : "undefined");
  for (float x : logsumexp.to_vector()) {
    ATTN_CHECK(!std::isnan(x) && x != -std::numeric_limits<float>::infinity(),
               "sdpa_backward: logsumexp holds ", x,
               "; pass the logsumexp attn::sdpa returned with this output");
  }
}

namespace {
std::atomic<int64_t> two_pass_below{0};  // 0: the machine's core count

// The backward's share of the non-finite scans (flash_problem.hpp): the Q, O and dO rows
// [q0, q0 + rows) of head (b, h); its tasks scan K and V with key_rows_non_finite.
bool query_rows_non_finite(const kernels::FlashBackwardProblem& p, int64_t b, int64_t h, int64_t q0,
                           int64_t rows) {
  const kernels::FlashProblem& f = p.forward;
  if (f.q_words != nullptr) {  // bfloat16 tensors
    return rows_non_finite(f.q_words, f.q_stride, b, h, q0, rows, f.d) ||
           rows_non_finite(f.out_words, f.out_stride, b, h, q0, rows, f.dv) ||
           rows_non_finite(p.d_out_words, p.d_out_stride, b, h, q0, rows, f.dv);
  }
  return rows_non_finite(f.q, f.q_stride, b, h, q0, rows, f.d) ||
         rows_non_finite(f.out, f.out_stride, b, h, q0, rows, f.dv) ||
         rows_non_finite(p.d_out, p.d_out_stride, b, h, q0, rows, f.dv);
}

}  // namespace

void set_backward_two_pass_below(int64_t pairs) { two_pass_below = pairs; }

// dsink_h = −Σ_{b,i} e^{sink_h − L_bhi}·D_bhi with D_bhi = Σ_e dO·O (attn/sdpa_backward.hpp):
// e^{sink − L} is the weight the sink took in the row. A few multiply-adds per output element,
// summed in double in a fixed order (batch, then query).
Tensor sink_gradients(const Tensor& out4, const Tensor& d_out4, const Tensor& lse3,
                      const std::vector<float>& sinks) {
  const int64_t batch = out4.dim(0), heads = out4.dim(1), tq = out4.dim(2), dv = out4.dim(3);
  Tensor gradients({heads});
  parallel_for(heads, [&](int64_t h) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < tq; ++i) {
        const float* o =
            out4.data() + b * out4.strides()[0] + h * out4.strides()[1] + i * out4.strides()[2];
        const float* g = d_out4.data() + b * d_out4.strides()[0] + h * d_out4.strides()[1] +
                         i * d_out4.strides()[2];
        const float l =
            lse3.data()[b * lse3.strides()[0] + h * lse3.strides()[1] + i * lse3.strides()[2]];
        double dot = 0.0;
        for (int64_t e = 0; e < dv; ++e) dot += double{g[e]} * o[e];
        sum -= std::exp(double{sinks[static_cast<size_t>(h)]} - l) * dot;
      }
    }
    gradients.data()[h] = static_cast<float>(sum);
  });
  return gradients;
}

Tensor sink_gradients_of(const Tensor& out, const Tensor& d_out, const Tensor& logsumexp,
                         const std::vector<float>& sinks) {
  Shape lse3 = logsumexp.shape();  // (…, Tq) as (B, H, Tq)
  while (lse3.size() < 3) lse3.insert(lse3.begin(), 1);
  return sink_gradients(as_rank4(with_contiguous_rows(out)), as_rank4(with_contiguous_rows(d_out)),
                        logsumexp.contiguous().reshape(lse3), sinks);
}

NewGradients new_gradients(const Shape& q, const Shape& k, const Shape& v, int64_t tk,
                           const SdpaOptions& options, const Tensor& dmask,
                           bool float_key_gradients) {
  NewGradients fresh{
      SdpaGradients{Tensor::uninitialized(q),
                    float_key_gradients ? Tensor::uninitialized(k) : Tensor{},
                    float_key_gradients ? Tensor::uninitialized(v) : Tensor{}, Tensor{}, Tensor{}},
      Tensor{}};
  if (options.return_mask_gradient) {
    const Shape scores = with_last_dim(q, tk);
    const int64_t score_count =
        std::accumulate(scores.begin(), scores.end(), int64_t{1}, std::multiplies<>());
    if (dmask.defined() && dmask.numel() == score_count) {  // the mask is not broadcast
      fresh.score_gradient = dmask.reshape(scores);
      fresh.score_gradient_zeroed = false;
    } else {
      check_fits_in_memory(scores, "sdpa_backward: the mask's gradient");
      fresh.score_gradient = Tensor(scores);
    }
  }
  return fresh;
}

void point_at_gradients(kernels::FlashBackwardProblem& p, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv, const Tensor& score_gradient,
                        bool score_gradient_zeroed) {
  // The gradient views' storage is writable: the caller made them for this call.
  const Tensor dq4 = as_rank4(dq);
  p.dq = const_cast<float*>(dq4.data());
  copy_strides(dq4, p.dq_stride);
  if (dk.defined()) {
    const Tensor dk4 = as_rank4(dk);
    p.dk = const_cast<float*>(dk4.data());
    copy_strides(dk4, p.dk_stride);
  }
  if (dv.defined()) {
    const Tensor dv4 = as_rank4(dv);
    p.dv = const_cast<float*>(dv4.data());
    copy_strides(dv4, p.dv_stride);
  }
  if (score_gradient.defined()) {
    const Tensor ds4 = as_rank4(score_gradient);
    p.dscores = const_cast<float*>(ds4.data());
    copy_strides(ds4, p.dscores_stride);
    p.dscores_zeroed = score_gradient_zeroed;
  }
}

int64_t backward_two_pass_below() {
  const int64_t set = two_pass_below;
  return set > 0 ? set : machine_cores();
}

namespace {

// The loop order backward_tasks takes: two passes when there are fewer (batch, K/V head) pairs
// than backward_two_pass_below(), else one task per pair.
bool in_two_passes(const AttentionDims& dims) {
  return dims.batch * dims.kv_heads < backward_two_pass_below();
}

}  // namespace

void sdpa_backward_into(const AttentionDims& dims, const Tensor& q_in, const Tensor& k_in,
                        const Tensor& v_in, const Tensor& out_in, const float* logsumexp,
                        const Tensor& d_out_in, const SdpaOptions& options, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv, std::atomic<bool>* non_finite_input,
                        const Tensor& score_gradient, OperandValues values,
                        bool score_gradient_zeroed) {
  const PhaseScope clock(Phase::kAttention);
  check_gradient_view(dq, q_in, "dq");
  check_gradient_view(dk, k_in, "dk");
  check_gradient_view(dv, v_in, "dv");
  // On AMX tiles the packing rounds Q, K, V and dO as it reads them (amx_operands.hpp).
  const bool on_amx = products_on_amx(options);
  // The two-pass order's tasks each read a share of a head's K and V rows: rows apart are
  // copied consecutive for them here, where the per-head tasks copy their own (staged_keys.hpp).
  auto keys_as_read = [&](const Tensor& t) {
    const Tensor rows = operand_rows_for(t, options, on_amx, values);
    return in_two_passes(dims) && !on_amx ? with_consecutive_rows(rows) : rows;
  };
  const Tensor q = operand_rows_for(q_in, options, on_amx, values), k = keys_as_read(k_in),
               v = keys_as_read(v_in), out = with_contiguous_rows(out_in),
               d_out = operand_rows_for(d_out_in, options, on_amx, values);
  const Tensor mask4 = broadcast_mask(options.mask, with_last_dim(q, dims.tk));

  kernels::FlashBackwardProblem p{};
  p.forward = flash_problem(dims, as_rank4(q), as_rank4(k), as_rank4(v), as_rank4(out), mask4,
                            options, const_cast<float*>(logsumexp));  // read only
  const Tensor d_out4 = as_rank4(d_out);
  AmxOperands amx_operands;  // bf16 products on a CPU with AMX: K and V packed for its tiles
  if (on_amx) {  // K and V scanned for NaN and ±inf as they are packed: the tasks skip them
    attach_amx_operands(p.forward, AmxPass::kBackward, amx_operands, non_finite_input);
  }
  p.d_out = d_out4.data();
  copy_strides(d_out4, p.d_out_stride);
  point_at_gradients(p, dq, dk, dv, score_gradient, score_gradient_zeroed);
  backward_tasks(p, dims, non_finite_input, non_finite_input != nullptr && !on_amx);
}

void backward_tasks(const kernels::FlashBackwardProblem& p, const AttentionDims& dims,
                    std::atomic<bool>* non_finite_input, bool scan_keys) {
  // Every task owns the gradient rows it writes, so there are no races, and sums its
  // contributions in one fixed order: the result does not depend on the thread count.
  const size_t scratch_floats = kernels::flash_backward_scratch_floats(p.forward);
  const WorkerScratch scratch(num_threads(), scratch_floats);
  auto buffer_of = [&](int worker) { return scratch.of(worker); };
  auto flag = [&](bool found) {
    if (found) non_finite_input->store(true, std::memory_order_relaxed);
  };
  const int64_t pairs = dims.batch * dims.kv_heads, group = dims.heads / dims.kv_heads;
  if (!in_two_passes(dims)) {  // tasks: (batch, K/V head)
    // K and V rows apart (a packed batch's, a layer's QKV columns): each worker's copy of its
    // head's rows.
    std::vector<StagedKeys> staged(static_cast<size_t>(num_threads()));
    const bool stage = StagedKeys::applies(p.forward);
    parallel_for_workers(pairs, [&](int64_t task, int worker) {
      const int64_t b = task / dims.kv_heads, kv_h = task % dims.kv_heads;
      kernels::FlashBackwardProblem as_read = p;
      if (stage)
        as_read.forward =
            staged[static_cast<size_t>(worker)].problem_for(p.forward, b, kv_h * group);
      if (non_finite_input) {
        bool found = scan_keys && key_rows_non_finite(as_read.forward, b, kv_h, 0, dims.tk);
        for (int64_t h = kv_h * group; h < (kv_h + 1) * group && !found; ++h) {
          found = query_rows_non_finite(p, b, h, 0, dims.tq);
        }
        flag(found);
      }
      if (task + 1 < pairs) {  // most often this worker's next task (see kernels/prefetch.hpp)
        kernels::prefetch_backward_head(p, (task + 1) / dims.kv_heads, (task + 1) % dims.kv_heads);
      }
      kernels::flash_backward_head(as_read, b, kv_h, buffer_of(worker));
    });
    return;
  }
  // Two passes: (batch, K/V head, key chunk) tasks for dK, dV; (batch, head, query block)
  // tasks for dQ.
  // A causal mask makes early key chunks and late query blocks the dear ones: the tasks run
  // alternately from both ends of each list, so the threads' shares cost the same.
  const int64_t chunks = (dims.tk + kernels::kKeyChunk - 1) / kernels::kKeyChunk;
  parallel_for_workers(pairs * chunks, [&](int64_t i, int worker) {
    const int64_t task = alternating_ends(i, pairs * chunks);
    const int64_t pair = task / chunks, j_begin = task % chunks * kernels::kKeyChunk;
    if (scan_keys) {
      flag(key_rows_non_finite(p.forward, pair / dims.kv_heads, pair % dims.kv_heads, j_begin,
                               std::min(kernels::kKeyChunk, dims.tk - j_begin)));
    }
    kernels::flash_backward_key_chunk(p, pair / dims.kv_heads, pair % dims.kv_heads, j_begin,
                                      buffer_of(worker));
  });
  const int64_t query_blocks = (dims.tq + kernels::kQueryBlock - 1) / kernels::kQueryBlock;
  parallel_for_workers(dims.batch * dims.heads * query_blocks, [&](int64_t i, int worker) {
    const int64_t task = alternating_ends(i, dims.batch * dims.heads * query_blocks);
    const int64_t bh = task / query_blocks, q0 = task % query_blocks * kernels::kQueryBlock;
    if (non_finite_input) {
      flag(query_rows_non_finite(p, bh / dims.heads, bh % dims.heads, q0,
                                 std::min(kernels::kQueryBlock, dims.tq - q0)));
    }
    kernels::flash_backward_query_block(p, bh / dims.heads, bh % dims.heads, q0, buffer_of(worker));
  });
}

SdpaGradients sdpa_backward_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& logsumexp, const Tensor& d_out,
                               const SdpaOptions& options, OperandValues values,
                               const Tensor& dmask) {
  const detail::AttentionDims dims = detail::check_attention(q, k, v, options);
  const Shape out_shape = detail::with_last_dim(q, dims.dv);
  ATTN_CHECK(out.defined() && out.shape() == out_shape, "sdpa_backward: out must be ",
             to_string(out_shape), " (what attn::sdpa returned), got ",
             out.defined() ? out.shape_string() : "undefined");
  detail::check_output_gradient(q, dims, d_out);
  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  detail::check_logsumexp(logsumexp, lse_shape);
  const Tensor lse = logsumexp.contiguous();

  detail::check_mask_gradient_request(options, "sdpa_backward");
  if (dmask.defined())
    detail::check_mask_gradient_buffer(dmask, options, {&q, &k, &v, &out, &logsumexp, &d_out});
  detail::NewGradients fresh =
      detail::new_gradients(q.shape(), k.shape(), v.shape(), dims.tk, options, dmask);
  SdpaGradients& grads = fresh.grads;
  std::atomic<bool> non_finite_input{false};
  detail::sdpa_backward_into(dims, q, k, v, out, lse.data(), d_out, options, grads.dq, grads.dk,
                             grads.dv, &non_finite_input, fresh.score_gradient, values,
                             fresh.score_gradient_zeroed);
  if (non_finite_input.load()) {  // name the first non-finite input: each check throws
    detail::check_finite_qkv("sdpa_backward", q, k, v);
    detail::check_finite(out, "sdpa_backward", "out");
    detail::check_finite(d_out, "sdpa_backward", "d_out");
  }
  if (!options.sinks.empty())
    grads.dsinks = detail::sink_gradients_of(out, d_out, lse, options.sinks);
  if (fresh.score_gradient.defined())
    grads.dmask = detail::reduce_to_mask_shape(fresh.score_gradient, options.mask);
  if (dmask.defined()) {  // written in place, or (a broadcast mask) summed, then copied in
    Tensor kept = dmask;  // a handle on the caller's storage
    if (!grads.dmask.shares_storage(kept)) kept.copy_from(grads.dmask);
    grads.dmask = kept;
  }
  return grads;
}

}  // namespace detail

SdpaGradients sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& logsumexp, const Tensor& d_out,
                            const SdpaOptions& options) {
  return detail::sdpa_backward_of(q, k, v, out, logsumexp, d_out, options,
                                  detail::OperandValues::kFloat32);
}

SdpaGradients sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& logsumexp, const Tensor& d_out,
                            const SdpaOptions& options, const Tensor& dmask) {
  ATTN_CHECK(dmask.defined(),
             "sdpa_backward: dmask, the buffer for the mask's gradient, is "
             "undefined; call sdpa_backward without it for a new one");
  SdpaOptions with_gradient = options;
  with_gradient.return_mask_gradient = true;
  return detail::sdpa_backward_of(q, k, v, out, logsumexp, d_out, with_gradient,
                                  detail::OperandValues::kFloat32, dmask);
}

}  // namespace attn
