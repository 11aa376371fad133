// MultiHeadAttention::backward: the forward's steps in reverse, each through the same fast
// paths (oneDNN GEMMs for the projections, the fused attention backward for the heads):
//   Y = A·Wo + bo              dWo = Aᵀ·dY,  dbo = Σ_rows dY,  dA = dY·Woᵀ
//   A = attention(Q, K, V)     dQ, dK, dV = sdpa_backward(…, dA)   (written into dQKV)
//   Q, K rotated (RoPE)        dQ, dK rotated back (a rotation's transpose is its inverse)
//   QKV = X·Wqkv + bqkv        dWqkv = Xᵀ·dQKV,  dbqkv = Σ_rows dQKV,  dX = dQKV·Wqkvᵀ
// with A (B·T, H·d_head) the merged heads and QKV (B·T, width) as in the forward.
#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/mha.hpp"
#include "src/sdpa_common.hpp"

namespace attn {
namespace {

// Σ over the rows of a (rows, cols) contiguous matrix: a bias gradient.
Tensor column_sums(const float* m, int64_t rows, int64_t cols) {
  Tensor sums({cols});
  float* out = sums.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c] += m[r * cols + c];
  }
  return sums;
}

// C (m, n) = Aᵀ·B for A (k, m) and B (k, n), all contiguous: a weight gradient.
Tensor transposed_product(const Tensor& a, const Tensor& b, int64_t k, int64_t m, int64_t n) {
  Tensor c({m, n});
  gemm(true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 0.0f, c.data(), n);
  return c;
}

// C (m, n) = A·Bᵀ for A (m, k) and B (n, k), all contiguous: an input gradient.
Tensor product_with_transpose(const Tensor& a, const Tensor& b, int64_t m, int64_t k, int64_t n) {
  Tensor c({m, n});
  gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  return c;
}

}  // namespace

MhaGradients MultiHeadAttention::backward(const MhaActivations& saved, const Tensor& d_y_in) const {
  const int64_t d_model = config_.d_model, width = wqkv.dim(1), merged = wo.dim(0);
  ATTN_CHECK(saved.x.defined() && saved.qkv.defined() && saved.attended.defined() &&
                 saved.qkv.rank() == 3 && saved.qkv.dim(2) == width &&
                 saved.attended.numel() == saved.x.dim(0) * saved.x.dim(1) * merged,
             "MultiHeadAttention::backward: `saved` must come from forward(x, options, saved) on "
             "this layer");
  const int64_t b = saved.x.dim(0), t = saved.x.dim(1), rows = b * t;
  ATTN_CHECK(d_y_in.defined() && d_y_in.shape() == (Shape{b, t, d_model}),
             "MultiHeadAttention::backward: d_y must be (", b, ", ", t, ", ", d_model, "), got ",
             d_y_in.defined() ? d_y_in.shape_string() : "undefined");
  const Tensor d_y = d_y_in.contiguous(), x = saved.x.contiguous();
  const Tensor w_qkv = wqkv.contiguous(), w_o = wo.contiguous();  // the members may be views

  MhaGradients grads;
  // Output projection.
  grads.dwo = transposed_product(saved.attended, d_y, rows, merged, d_model);
  if (bo.defined()) grads.dbo = column_sums(d_y.data(), rows, d_model);
  const Tensor d_attended = product_with_transpose(d_y, w_o, rows, d_model, merged)
                                .reshape({b, t, config_.n_heads, head_dim()});

  // Attention, into the columns of dQKV that the forward read Q, K and V from.
  Tensor d_qkv({b, t, width});
  const Tensor q = qkv_heads(saved.qkv, QkvPart::kQuery), k = qkv_heads(saved.qkv, QkvPart::kKey),
               v = qkv_heads(saved.qkv, QkvPart::kValue);
  Tensor dq = qkv_heads(d_qkv, QkvPart::kQuery), dk = qkv_heads(d_qkv, QkvPart::kKey);
  const Tensor dv = qkv_heads(d_qkv, QkvPart::kValue);
  detail::sdpa_backward_into(detail::check_attention(q, k, v, saved.options), q, k, v,
                             saved.attended.permute({0, 2, 1, 3}), saved.logsumexp.data(),
                             d_attended.permute({0, 2, 1, 3}), saved.options, dq, dk, dv);
  if (config_.rope) {
    apply_rope_inverse(dq, 0, config_.rope_base);
    apply_rope_inverse(dk, 0, config_.rope_base);
  }

  // Input projection.
  grads.dwqkv = transposed_product(x, d_qkv, rows, d_model, width);
  if (bqkv.defined()) grads.dbqkv = column_sums(d_qkv.data(), rows, width);
  grads.dx = product_with_transpose(d_qkv, w_qkv, rows, width, d_model).reshape({b, t, d_model});
  return grads;
}

}  // namespace attn
