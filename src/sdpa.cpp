// The fused attention forward: argument checks, the task partition over (batch, head, query
// block), per-worker scratch. The SIMD work is in src/kernels/flash_forward.cpp.
#include <hwy/aligned_allocator.h>

#include <cmath>
#include <vector>

#include "attn/error.hpp"
#include "attn/sdpa.hpp"
#include "attn/threads.hpp"
#include "src/kernels/flash_forward.hpp"
#include "src/sdpa_common.hpp"

namespace attn {
namespace {

// The kernel reads each row with unit stride; a view whose last dim is strided is copied.
Tensor with_contiguous_rows(const Tensor& t) {
  return t.strides().back() == 1 ? t : t.contiguous();
}

void copy_strides(const Tensor& t4, int64_t (&strides)[3]) {
  for (int i = 0; i < 3; ++i) strides[i] = t4.strides()[i];
}

}  // namespace

SdpaResult sdpa(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                const SdpaOptions& options) {
  const detail::AttentionDims dims = detail::check_attention(q_in, k_in, v_in, options);
  const Tensor q = with_contiguous_rows(q_in), k = with_contiguous_rows(k_in),
               v = with_contiguous_rows(v_in);
  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  if (lse_shape.empty()) lse_shape = {1};  // unreachable: q has rank >= 2
  SdpaResult result{Tensor(detail::with_last_dim(q, dims.dv)), Tensor{}, Tensor(lse_shape)};
  const Tensor mask4 = detail::broadcast_mask(options.mask, detail::with_last_dim(q, dims.tk));

  const Tensor q4 = detail::as_rank4(q), k4 = detail::as_rank4(k), v4 = detail::as_rank4(v);
  const Tensor out4 = detail::as_rank4(result.output);
  kernels::FlashProblem p{};
  p.q = q4.data();
  copy_strides(q4, p.q_stride);
  p.k = k4.data();
  copy_strides(k4, p.k_stride);
  p.v = v4.data();
  copy_strides(v4, p.v_stride);
  p.out = result.output.data();
  copy_strides(out4, p.out_stride);
  p.logsumexp = result.logsumexp.data();
  p.batch = dims.batch;
  p.heads = dims.heads;
  p.kv_heads = dims.kv_heads;
  p.tq = dims.tq;
  p.tk = dims.tk;
  p.d = dims.d;
  p.dv = dims.dv;
  p.scale = dims.scale;
  p.causal = options.causal;
  p.window = options.window;
  if (mask4.defined()) {
    p.mask = mask4.data();
    for (int i = 0; i < 4; ++i) p.mask_stride[i] = mask4.strides()[i];
    p.mask_kind = options.mask.kind;
  }
  p.key_lengths = options.key_lengths.empty() ? nullptr : options.key_lengths.data();

  // Tasks: (batch, head, query block), the blocks of one head consecutive so that the
  // threads share that head's K and V in cache (taking the blocks of every head in turn
  // instead streamed all heads' K/V through L3). With a causal mask later blocks see more
  // keys, so each head's blocks go last-first (the pool hands out indices in increasing
  // order) and the cheap early blocks fill the gaps. Heads sharing a K/V head are adjacent.
  const int64_t blocks = (dims.tq + kernels::kQueryBlock - 1) / kernels::kQueryBlock;
  const int64_t heads_total = dims.batch * dims.heads;
  const size_t scratch_floats = kernels::flash_forward_scratch_floats(p);
  std::vector<hwy::AlignedFreeUniquePtr<float[]>> scratch(static_cast<size_t>(num_threads()));
  parallel_for_workers(blocks * heads_total, [&](int64_t task, int worker) {
    const int64_t bh = task / blocks;
    const int64_t block = blocks - 1 - task % blocks;
    auto& buffer = scratch[static_cast<size_t>(worker)];
    if (!buffer) buffer = hwy::AllocateAligned<float>(scratch_floats);
    const int64_t q0 = block * kernels::kQueryBlock;
    const int64_t rows = std::min(kernels::kQueryBlock, dims.tq - q0);
    kernels::flash_forward_block(p, bh / dims.heads, bh % dims.heads, q0, rows, buffer.get());
  });
  if (options.return_weights) result.weights = reference::sdpa(q_in, k_in, v_in, options).weights;
  return result;
}

}  // namespace attn
