// Reference matrix products. Accumulating in double makes this path a sharper oracle for the
// fast kernels than float accumulation would be, at no cost to readability.
#include "attn/error.hpp"
#include "attn/reference_matmul.hpp"

namespace attn::reference {

Tensor matmul(const Tensor& a, const Tensor& b) {
  ATTN_CHECK(a.rank() == 2 && b.rank() == 2, "matmul needs two matrices, got ", a.shape_string(),
             " and ", b.shape_string());
  ATTN_CHECK(a.dim(1) == b.dim(0), "matmul: inner dims differ: ", a.shape_string(), " · ",
             b.shape_string());
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  // Element (r, c) of a view lives at data()[r·stride0 + c·stride1].
  const float* pa = a.data();
  const float* pb = b.data();
  const int64_t a0 = a.strides()[0], a1 = a.strides()[1];
  const int64_t b0 = b.strides()[0], b1 = b.strides()[1];
  Tensor c({m, n});
  float* pc = c.data();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;  // c[i][j] = Σ_p a[i][p]·b[p][j]
      for (int64_t p = 0; p < k; ++p) sum += double{pa[i * a0 + p * a1]} * pb[p * b0 + j * b1];
      pc[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

Tensor linear(const Tensor& x, const Tensor& w) {
  ATTN_CHECK(x.defined() && w.defined(), "linear: undefined input or weight");
  ATTN_CHECK(w.rank() == 2, "linear: weight must be (d_in, d_out), got ", w.shape_string());
  ATTN_CHECK(x.dim(-1) == w.dim(0), "linear: x ", x.shape_string(), " has d_in ", x.dim(-1),
             " but weight ", w.shape_string(), " expects ", w.dim(0));
  // Flatten every leading dim into rows, multiply, restore the leading dims.
  const Tensor rows = x.contiguous().reshape({-1, x.dim(-1)});
  Shape out_shape = x.shape();
  out_shape.back() = w.dim(1);
  return reference::matmul(rows, w).reshape(out_shape);  // not attn::matmul, found by ADL
}

}  // namespace attn::reference
