// attn::sdpa_bfloat16 and sdpa_backward_bfloat16: the fused forward and backward on bfloat16
// views. On packed tiles the problem points at the caller's words (FlashProblem::q_words …) and
// the tasks of sdpa.cpp and sdpa_backward.cpp run it; elsewhere the views are widened to float32
// tensors for sdpa and sdpa_backward, told that the values need no rounding for bf16 products
// (detail::sdpa_of, sdpa_backward_of), and the forward's output is rounded back.
#include "attn/sdpa_bfloat16.hpp"

#include <atomic>
#include <initializer_list>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/threads.hpp"
#include "src/attention/amx_operands.hpp"
#include "src/attention/flash_problem.hpp"
#include "src/attention/fused.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/kernels/flash_backward.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/finite.hpp"
#include "src/reference/mask_gradient.hpp"

namespace attn {
namespace {

// where: the entry point, named in the message (sdpa_bfloat16 or sdpa_backward_bfloat16).
void check_view(const Bfloat16View& x, const char* name, const char* where) {
  ATTN_CHECK(x.data != nullptr, where, ": ", name, " has no data");
  ATTN_CHECK(x.shape.size() >= 2 && x.shape.size() <= 4 && x.strides.size() == x.shape.size(),
             where, ": ", name, " must have rank 2 to 4 and one stride per dim, got shape ",
             to_string(x.shape), " with ", x.strides.size(), " strides");
  for (int64_t size : x.shape) {
    ATTN_CHECK(size >= 1, where, ": ", name, " has an empty dim: ", to_string(x.shape));
  }
  ATTN_CHECK(x.shape.back() == 1 || x.strides.back() == 1, where, ": ", name,
             "'s last dim must be contiguous (stride 1), got strides ", to_string(x.strides));
}

// The b, h, t strides of x viewed as rank 4 (size-1 dims prepended, as as_rank4).
void rank4_strides(const Bfloat16View& x, int64_t (&strides)[3]) {
  const size_t r = x.shape.size();
  strides[0] = r == 4 ? x.strides[0] : 0;
  strides[1] = r >= 3 ? x.strides[r - 3] : 0;
  strides[2] = x.strides[r - 2];
}

// x's values widened into `into` (x's shape, contiguous; exact: a bfloat16 is a float's top
// half), a head of rows per task.
void widen_into(const Bfloat16View& x, Tensor into) {
  int64_t s[3];
  rank4_strides(x, s);
  const int64_t width = x.shape.back(), t_rows = x.shape[x.shape.size() - 2];
  const int64_t heads = x.shape.size() >= 3 ? x.shape[x.shape.size() - 3] : 1;
  float* dst = into.data();
  parallel_for(into.numel() / (t_rows * width), [&](int64_t bh) {
    kernels::widen_bfloat16(x.data + (bh / heads) * s[0] + (bh % heads) * s[1], s[2], t_rows, width,
                            dst + bh * t_rows * width);
  });
}

Tensor widened(const Bfloat16View& x) {
  Tensor t = Tensor::uninitialized(x.shape);
  widen_into(x, t);
  return t;
}

// The views' values as contiguous float32 tensors, views of one allocation. Separate ones, freed
// together after every call, had glibc trim its heap and grow it again each time: 6 737 brk
// calls in 1 220 calls of attn.torch's forward (T = 256), against 627, and page faults 9 % of
// its samples, against 0.6.
std::vector<Tensor> widened(std::initializer_list<const Bfloat16View*> views) {
  int64_t total = 0;
  for (const Bfloat16View* x : views) {
    int64_t count = 1;
    for (int64_t size : x->shape) count *= size;
    total += count;
  }
  const Tensor block = Tensor::uninitialized({total});
  std::vector<Tensor> all;
  int64_t offset = 0;
  for (const Bfloat16View* x : views) {
    all.push_back(block.as_strided(x->shape, contiguous_strides(x->shape), offset));
    widen_into(*x, all.back());
    offset += all.back().numel();
  }
  return all;
}

// out (rows of dv words, contiguous) = the float rows of o rounded to nearest (ties to even),
// as attn::to_bfloat16 rounds, over the threads.
void round_into(const Tensor& o, int64_t dv, uint16_t* out) {
  const float* from = o.data();
  detail::parallel_ranges(o.numel() / dv, 256, [&](int64_t first, int64_t last) {
    kernels::round_to_bfloat16_portable(from + first * dv, last - first, dv, dv, out + first * dv);
  });
}

}  // namespace

Tensor sdpa_bfloat16(const Bfloat16View& q, const Bfloat16View& k, const Bfloat16View& v,
                     uint16_t* out, const SdpaOptions& options_in) {
  SdpaOptions options = options_in;
  options.precision = Dtype::kBFloat16;
  ATTN_CHECK(!options.return_weights,
             "sdpa_bfloat16: return_weights is not available on bfloat16 views (the weights are "
             "float32: call sdpa on float32 tensors)");
  check_view(q, "q", "sdpa_bfloat16");
  check_view(k, "k", "sdpa_bfloat16");
  check_view(v, "v", "sdpa_bfloat16");
  ATTN_CHECK(out != nullptr, "sdpa_bfloat16: out has no data");
  const detail::AttentionDims dims = detail::check_attention(q.shape, k.shape, v.shape, options);

  if (!detail::products_on_amx(options)) {  // the vector kernels read float32
    // The widened values are bfloat16 already: sdpa's bf16 products need not round them.
    const std::vector<Tensor> qkv = widened({&q, &k, &v});
    const SdpaResult r =
        detail::sdpa_of(qkv[0], qkv[1], qkv[2], options, detail::OperandValues::kBfloat16);
    round_into(r.output, dims.dv, out);
    return r.logsumexp;
  }
  Shape lse_shape = q.shape;
  lse_shape.pop_back();
  Tensor logsumexp = Tensor::uninitialized(lse_shape);  // the kernels write every element

  const detail::PhaseScope clock(Phase::kAttention);
  const Tensor mask4 =
      detail::broadcast_mask(options.mask, detail::with_last_dim(q.shape, dims.tk));
  kernels::FlashProblem p =
      detail::flash_problem_without_operands(dims, mask4, options, logsumexp.data());
  p.q_words = q.data;
  rank4_strides(q, p.q_stride);
  p.k_words = k.data;
  rank4_strides(k, p.k_stride);
  p.v_words = v.data;
  rank4_strides(v, p.v_stride);
  p.out_words = out;
  p.out_stride[2] = dims.dv;
  p.out_stride[1] = dims.tq * dims.dv;
  p.out_stride[0] = dims.heads * dims.tq * dims.dv;
  std::atomic<bool> non_finite_input{false};
  detail::forward_tasks({p}, &non_finite_input, true);
  if (non_finite_input.load()) {  // throws, naming it
    detail::check_finite_qkv("sdpa", widened(q), widened(k), widened(v));
  }
  detail::check_scores_fit(dims, options, logsumexp);
  return logsumexp;
}

namespace {

// The problem's view of a gradient written as bfloat16 words: contiguous rows of `shape`.
void point_at_words(const Shape& shape, uint16_t* words, uint16_t*& to, int64_t (&strides)[3]) {
  to = words;
  rank4_strides(Bfloat16View{words, shape, contiguous_strides(shape)}, strides);
}

// Both entries' backward: the gradients as float32 tensors (into == nullptr), or rounded into
// the caller's bfloat16 rows.
SdpaGradients backward_of(const Bfloat16View& q, const Bfloat16View& k, const Bfloat16View& v,
                          const Bfloat16View& out, const Bfloat16View& d_out,
                          const Tensor& logsumexp, const SdpaOptions& options_in,
                          const Bfloat16Gradients* into) {
  SdpaOptions options = options_in;
  options.precision = Dtype::kBFloat16;
  check_view(q, "q", "sdpa_backward_bfloat16");
  check_view(k, "k", "sdpa_backward_bfloat16");
  check_view(v, "v", "sdpa_backward_bfloat16");
  check_view(out, "out", "sdpa_backward_bfloat16");
  check_view(d_out, "d_out", "sdpa_backward_bfloat16");
  const detail::AttentionDims dims = detail::check_attention(q.shape, k.shape, v.shape, options);
  const Shape out_shape = detail::with_last_dim(q.shape, dims.dv);
  Shape lse_shape = q.shape;
  lse_shape.pop_back();
  ATTN_CHECK(out.shape == out_shape, "sdpa_backward: out must be ", to_string(out_shape),
             " (what attn::sdpa returned), got ", to_string(out.shape));
  ATTN_CHECK(d_out.shape == out_shape, "sdpa_backward: d_out must have the output's shape ",
             to_string(out_shape), ", got ", to_string(d_out.shape));
  detail::check_logsumexp(logsumexp, lse_shape);
  if (into != nullptr) {
    ATTN_CHECK(into->dq != nullptr && into->dk != nullptr && into->dv != nullptr,
               "sdpa_backward_bfloat16: the bfloat16 gradients need dq, dk and dv to write into");
  }
  if (!detail::products_on_amx(options)) {  // the vector kernels read float32
    const std::vector<Tensor> all = widened({&q, &k, &v, &out, &d_out});
    SdpaGradients grads =
        detail::sdpa_backward_of(all[0], all[1], all[2], all[3], logsumexp, all[4], options,
                                 detail::OperandValues::kBfloat16);
    if (into != nullptr) {  // rounded here, the float32 ones dropped
      round_into(grads.dq, dims.d, into->dq);
      round_into(grads.dk, dims.d, into->dk);
      round_into(grads.dv, dims.dv, into->dv);
      grads.dq = grads.dk = grads.dv = Tensor{};
    }
    return grads;
  }
  detail::check_mask_gradient_request(options, "sdpa_backward");
  const Tensor lse = logsumexp.contiguous();

  const detail::PhaseScope clock(Phase::kAttention);
  const Tensor mask4 =
      detail::broadcast_mask(options.mask, detail::with_last_dim(q.shape, dims.tk));
  kernels::FlashBackwardProblem p{};
  p.forward = detail::flash_problem_without_operands(dims, mask4, options,
                                                     const_cast<float*>(lse.data()));  // read only
  p.forward.q_words = q.data;
  rank4_strides(q, p.forward.q_stride);
  p.forward.k_words = k.data;
  rank4_strides(k, p.forward.k_stride);
  p.forward.v_words = v.data;
  rank4_strides(v, p.forward.v_stride);
  p.forward.out_words = const_cast<uint16_t*>(out.data);  // read only in the backward
  rank4_strides(out, p.forward.out_stride);
  p.d_out_words = d_out.data;
  rank4_strides(d_out, p.d_out_stride);
  std::atomic<bool> non_finite_input{false};
  detail::AmxOperands amx_operands;  // K and V scanned as they are packed
  detail::attach_amx_operands(p.forward, detail::AmxPass::kBackward, amx_operands,
                              &non_finite_input);
  // With bfloat16 outputs dQ still collects in float32 (grads.dq, dropped at the end).
  detail::NewGradients fresh =
      detail::new_gradients(q.shape, k.shape, v.shape, dims.tk, options, Tensor{}, into == nullptr);
  SdpaGradients& grads = fresh.grads;
  detail::point_at_gradients(p, grads.dq, grads.dk, grads.dv, fresh.score_gradient);
  if (into != nullptr) {
    point_at_words(q.shape, into->dq, p.dq_words, p.dq_stride);
    point_at_words(k.shape, into->dk, p.dk_words, p.dk_stride);
    point_at_words(v.shape, into->dv, p.dv_words, p.dv_stride);
  }
  detail::backward_tasks(p, dims, &non_finite_input, false);
  if (into != nullptr) grads.dq = Tensor{};

  if (non_finite_input.load()) {  // name the first non-finite input: each check throws
    detail::check_finite_qkv("sdpa_backward", widened(q), widened(k), widened(v));
    detail::check_finite(widened(out), "sdpa_backward", "out");
    detail::check_finite(widened(d_out), "sdpa_backward", "d_out");
  }
  if (!options.sinks.empty())  // from O and dO in float32, as sdpa_backward's
    grads.dsinks = detail::sink_gradients_of(widened(out), widened(d_out), lse, options.sinks);
  if (fresh.score_gradient.defined())
    grads.dmask = detail::reduce_to_mask_shape(fresh.score_gradient, options.mask);
  return grads;
}

}  // namespace

SdpaGradients sdpa_backward_bfloat16(const Bfloat16View& q, const Bfloat16View& k,
                                     const Bfloat16View& v, const Bfloat16View& out,
                                     const Bfloat16View& d_out, const Tensor& logsumexp,
                                     const SdpaOptions& options) {
  return backward_of(q, k, v, out, d_out, logsumexp, options, nullptr);
}

SdpaGradients sdpa_backward_bfloat16(const Bfloat16View& q, const Bfloat16View& k,
                                     const Bfloat16View& v, const Bfloat16View& out,
                                     const Bfloat16View& d_out, const Tensor& logsumexp,
                                     const SdpaOptions& options, const Bfloat16Gradients& into) {
  return backward_of(q, k, v, out, d_out, logsumexp, options, &into);
}

}  // namespace attn
