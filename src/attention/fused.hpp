// The fused attention kernels over tensor views: the internal entry points that sdpa,
// sdpa_backward and the attention layer (layer.hpp) call once their arguments are checked
// (checks.hpp). Internal to the library.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/tensor.hpp"
#include "src/attention/flash_problem.hpp"
#include "src/kernels/flash_backward.hpp"
#include "src/kernels/flash_problem.hpp"
#include "src/reference/checks.hpp"

namespace attn::detail {

// Whether sdpa's call is the decode kernel's (a few query rows at the end of the keys, no mask,
// float K and V rows contiguous at one stride for both), and that call: output (B, H, Tq, d)
// and logsumexp, errors naming `caller`.
bool decode_applies(const AttentionDims& dims, const Tensor& q, const Tensor& k, const Tensor& v,
                    const SdpaOptions& options);
// Its two halves, which the paged cache (sdpa_varlen_paged.cpp) asks of its pages as well: K
// and V at one set of strides with rows contiguous and apart (row_dim: the dim that steps a
// position), and a decode step — float products, fewer than kDecodeRowLimit query rows at the
// end of the keys (or one row that sees every key), a head dim of whole vectors.
bool decode_rows_apply(const Tensor& k, const Tensor& v, int64_t row_dim, int64_t d);
bool decode_step_applies(const AttentionDims& dims, const Tensor& q, const SdpaOptions& options);
SdpaResult decode(const AttentionDims& dims, const Tensor& q, const Tensor& k, const Tensor& v,
                  const SdpaOptions& options, const char* caller);

// The fused forward into a given output view (Q's shape with dv last, contiguous rows), so
// that callers can pick the output's memory layout. dims: what check_attention(q, k, v,
// options) returned — the caller checks once (the check scans an additive mask's values).
// logsumexp: (…, Tq) contiguous or nullptr. non_finite_input: when given, set when q, k or v
// holds NaN or ±inf — each task scans its own query rows and a share of its K/V head's rows
// while they are in cache, so the check of attn's policy (src/reference/finite.hpp) runs on every
// thread instead of as a pass of its own. values: what q, k and v hold (flash_problem.hpp).
// Defined in sdpa.cpp.
void sdpa_into(const AttentionDims& dims, const Tensor& q, const Tensor& k, const Tensor& v,
               const SdpaOptions& options, const Tensor& out, float* logsumexp,
               std::atomic<bool>* non_finite_input = nullptr,
               OperandValues values = OperandValues::kFloat32);

// attn::sdpa and attn::sdpa_backward for callers that know what their float tensors hold:
// sdpa_bfloat16's widened views, whose bf16 products need no rounding of Q, K, V and dO.
// Defined in sdpa.cpp and sdpa_backward.cpp.
SdpaResult sdpa_of(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options,
                   OperandValues values);
// dmask: where defined, the buffer the caller keeps for the mask's gradient (the public
// sdpa_backward overload that takes one); the result's dmask is it.
SdpaGradients sdpa_backward_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& logsumexp, const Tensor& d_out,
                               const SdpaOptions& options, OperandValues values,
                               const Tensor& dmask = Tensor{});

// The fused forward's tasks over several problems as one list (sdpa_into's one problem, or the
// sequences of a packed batch: sdpa_varlen.cpp), each problem's logsumexp where it points.
// non_finite_input: as sdpa_into's. on_amx: products_on_amx of the call (amx_operands.hpp),
// which decided whether the problems' Q, K and V were rounded. Defined in sdpa.cpp.
void forward_tasks(const std::vector<kernels::FlashProblem>& problems,
                   std::atomic<bool>* non_finite_input, bool on_amx);

// The check after a fused forward: finite inputs must give a finite result or an error (scores
// past float32's range make the online softmax NaN, or hide every key), which shows in the
// logsumexp. Throws attn::Error naming the query. Defined in sdpa.cpp.
void check_scores_fit(const AttentionDims& dims, const SdpaOptions& options,
                      const Tensor& logsumexp);

// The sinks' gradient (attn/sdpa_backward.hpp), (H,), from the forward's output, dL/dO (both
// (B, H, Tq, dv) views with contiguous rows) and logsumexp (a (B, H, Tq) view): sdpa_backward's
// and, on views of its packed tensors, sdpa_varlen_backward's. Defined in sdpa_backward.cpp.
Tensor sink_gradients(const Tensor& out4, const Tensor& d_out4, const Tensor& lse3,
                      const std::vector<float>& sinks);

// sink_gradients on the outputs of one call: out and d_out of any rank with their logsumexp
// (…, Tq), as sdpa_backward and sdpa_backward_bfloat16 take them.
Tensor sink_gradients_of(const Tensor& out, const Tensor& d_out, const Tensor& logsumexp,
                         const std::vector<float>& sinks);

// What sdpa_backward and sdpa_backward_bfloat16 return, before the kernels write it: dQ, dK and
// dV of the inputs' shapes, not zeroed (the kernels write every element), and, when the options
// ask for the mask's gradient, dS of every score (q's shape with tk columns): a view of the
// caller's `dmask` buffer where one is given and the mask is not broadcast (not zeroed: the
// kernels then write every element), else a fresh tensor, zeroed, since the kernels write only
// the keys that queries see. Throws when dS would not fit in memory.
struct NewGradients {
  SdpaGradients grads;
  Tensor score_gradient;
  bool score_gradient_zeroed = true;
};
// With float_key_gradients false, dK and dV are left undefined: the kernel writes them as
// bfloat16 words into the caller's memory (sdpa_backward_bfloat16's outputs).
NewGradients new_gradients(const Shape& q, const Shape& k, const Shape& v, int64_t tk,
                           const SdpaOptions& options, const Tensor& dmask = Tensor{},
                           bool float_key_gradients = true);

// Points the problem's gradient outputs at dq, dk, dv (contiguous rows) and, when defined, the
// score gradient. An undefined dk or dv leaves its pointer as it is.
void point_at_gradients(kernels::FlashBackwardProblem& p, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv, const Tensor& score_gradient,
                        bool score_gradient_zeroed = true);

// The fused backward's loop order (src/kernels/flash_backward.hpp): one task per (batch, K/V
// head) when there are at least this many of them, else two passes over key and query blocks.
// Default: the machine's core count — not the thread count, because the two orders sum in
// different orders and the result must not depend on set_num_threads. Tests set it to reach
// both orders on any machine; 0 restores the default.
void set_backward_two_pass_below(int64_t pairs);
int64_t backward_two_pass_below();

// The fused backward into given gradient views (q's, k's and v's shapes, contiguous rows;
// every element is written). out: the forward's output; logsumexp: (…, Tq) contiguous, from
// the forward. dims: what check_attention(q, k, v, options) returned. non_finite_input: as
// sdpa_into's, for q, k, v, out and d_out. score_gradient: with an additive mask's gradient
// asked for, a contiguous (…, Tq, Tk) tensor that receives dS; else undefined;
// score_gradient_zeroed: whether it holds zeros already (new_gradients says). values: what q,
// k, v and d_out hold. Defined in sdpa_backward.cpp.
void sdpa_backward_into(const AttentionDims& dims, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& out, const float* logsumexp,
                        const Tensor& d_out, const SdpaOptions& options, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv,
                        std::atomic<bool>* non_finite_input = nullptr,
                        const Tensor& score_gradient = Tensor{},
                        OperandValues values = OperandValues::kFloat32,
                        bool score_gradient_zeroed = true);

// The task partition of the fused backward over a problem whose pointers are set
// (sdpa_backward_into's, or sdpa_backward_bfloat16's words): one task per (batch, K/V head), or the
// two passes. scan_keys: the tasks scan K and V for NaN and ±inf (not when the packing scanned
// them).
void backward_tasks(const kernels::FlashBackwardProblem& p, const AttentionDims& dims,
                    std::atomic<bool>* non_finite_input, bool scan_keys);

// The logsumexp sdpa_backward takes: of the shape `expected` and the forward's (finite, or +inf
// for a row that sees no key); throws attn::Error otherwise. Defined in sdpa_backward.cpp.
void check_logsumexp(const Tensor& logsumexp, const Shape& expected);

}  // namespace attn::detail
