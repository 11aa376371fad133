#include "src/attention/flash_problem.hpp"

#include <memory>

#include "src/core/kept_buffer.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/kernels/flash_forward.hpp"
#include "src/kernels/reductions.hpp"

namespace attn::detail {

Tensor with_contiguous_rows(const Tensor& t) {
  return t.strides().back() == 1 ? t : t.contiguous();
}

Tensor with_consecutive_rows(const Tensor& t) {
  const bool rows_apart = t.rank() >= 2 && t.dim(-2) > 1 && t.strides()[t.rank() - 2] != t.dim(-1);
  if (rows_apart && t.dim(-2) >= kernels::kKeyBlock) return t.contiguous();
  return with_contiguous_rows(t);
}

Tensor as_product_operand(const Tensor& t, const SdpaOptions& options, bool on_amx,
                          OperandValues values) {
  if (options.precision != Dtype::kBFloat16 || on_amx || values == OperandValues::kBfloat16)
    return t;
  // Rounded a (b, h) matrix of rows at a time from t's own rows (a layer's Q, K, V columns lie
  // apart) into a block the calling thread keeps for its next call: a contiguous copy and then a
  // fresh rounded tensor faulted about 50 pages an operand a call at the small GPT's shape
  // (kept_buffer.hpp).
  const Tensor t4 = as_rank4(with_contiguous_rows(t));
  const int64_t heads = t4.dim(1), rows = t4.dim(2), width = t4.dim(3), numel = t.numel();
  auto block = std::make_shared<KeptBuffer>(static_cast<size_t>(numel) * sizeof(float));
  float* rounded = block->as<float>();
  for (int64_t bh = 0; bh < t4.dim(0) * heads; ++bh) {
    kernels::round_float_rows_to_bfloat16(
        t4.data() + (bh / heads) * t4.strides()[0] + (bh % heads) * t4.strides()[1],
        t4.strides()[2], rows, width, rounded + bh * rows * width);
  }
  return Tensor::from_external(rounded, numel, t.shape(), contiguous_strides(t.shape()), 0,
                               std::move(block));
}

void copy_strides(const Tensor& t4, int64_t (&strides)[3]) {
  for (int i = 0; i < 3; ++i) strides[i] = t4.strides()[i];
}

kernels::FlashProblem flash_problem(const AttentionDims& dims, const Tensor& q4, const Tensor& k4,
                                    const Tensor& v4, const Tensor& out4, const Tensor& mask4,
                                    const SdpaOptions& options, float* logsumexp) {
  kernels::FlashProblem p = flash_problem_without_operands(dims, mask4, options, logsumexp);
  p.q = q4.data();
  copy_strides(q4, p.q_stride);
  p.k = k4.data();
  copy_strides(k4, p.k_stride);
  p.v = v4.data();
  copy_strides(v4, p.v_stride);
  p.out = const_cast<float*>(out4.data());  // a Tensor is a handle: its storage is writable
  copy_strides(out4, p.out_stride);
  return p;
}

kernels::FlashProblem flash_problem_without_operands(const AttentionDims& dims, const Tensor& mask4,
                                                     const SdpaOptions& options, float* logsumexp) {
  kernels::FlashProblem p{};
  p.logsumexp = logsumexp;
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
  p.query_position0 = dims.query_position0;
  if (mask4.defined()) {
    p.mask = mask4.data();
    for (int i = 0; i < 4; ++i) p.mask_stride[i] = mask4.strides()[i];
    p.mask_kind = options.mask.kind;
  }
  p.key_lengths = options.key_lengths.empty() ? nullptr : options.key_lengths.data();
  p.key_starts = options.key_starts.empty() ? nullptr : options.key_starts.data();
  p.softcap = options.softcap;
  p.alibi_slopes = options.alibi_slopes.empty() ? nullptr : options.alibi_slopes.data();
  p.sinks = options.sinks.empty() ? nullptr : options.sinks.data();
  p.bf16_products = options.precision == Dtype::kBFloat16;
  return p;
}

bool key_rows_non_finite(const kernels::FlashProblem& p, int64_t b, int64_t kv_h, int64_t j0,
                         int64_t rows) {
  return rows_non_finite(p.k, p.k_stride, b, kv_h, j0, rows, p.d) ||
         rows_non_finite(p.v, p.v_stride, b, kv_h, j0, rows, p.dv);
}

}  // namespace attn::detail
