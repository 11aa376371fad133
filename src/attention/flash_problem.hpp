// Tensors -> the fused kernels' plain-data problem (kernels::FlashProblem): shared by the
// forward (sdpa.cpp) and the backward (sdpa_backward.cpp). Internal to the library.
#pragma once

#include <cstdint>

#include "attn/sdpa.hpp"
#include "src/kernels/flash_problem.hpp"
#include "src/kernels/reductions.hpp"
#include "src/reference/checks.hpp"

namespace attn::detail {

// The kernels read each row with unit stride; a view whose last dim is strided is copied.
Tensor with_contiguous_rows(const Tensor& t);

// K or V as the kernels read them best: a key block's rows one after another. A view whose
// rows are apart — (B, T, H, d) storage viewed (B, H, T, d), rows H·d floats apart, 4 KiB at
// H = 16, d = 64, all in a few L1 sets — is copied first when it has at least kKeyBlock rows
// (a copy of T·d floats per head against the T²·d of attention): a causal forward at T = 4096,
// H = 16, d = 64 on two Zen 2 threads took 367 ms from such views and 222 from contiguous ones.
// Only the backward's two-pass order copies so; the forward's tasks and the backward's per-head
// tasks copy each head's rows as they come to it (staged_keys.hpp).
Tensor with_consecutive_rows(const Tensor& t);

// What the float tensors given to the fused kernels hold: any floats, which bf16 products round,
// or values that are bfloat16 already (sdpa_bfloat16's widened views), which rounding would
// copy unchanged.
enum class OperandValues { kFloat32, kBfloat16 };

// An operand of attention's products (Q, K, V, dO) as options.precision gives it to the vector
// kernels: t itself, or for kBFloat16 a contiguous copy with every value rounded to the nearest
// bfloat16 (kept as float). On AMX tiles (on_amx: products_on_amx of the call) t itself: the
// tiles' packers round it as they read it; and t itself when it holds bfloat16 values already.
Tensor as_product_operand(const Tensor& t, const SdpaOptions& options, bool on_amx,
                          OperandValues values = OperandValues::kFloat32);

// Q, K, V (or dO) as the kernels read them: rows contiguous, and rounded when the products are
// bf16 and not on AMX (the rounded copy is contiguous already; the tiles' packers round as they
// read). Rows that lie apart are left so: Q and dO are read once per task, and the tasks copy a
// K/V head's rows where they read them again and again (staged_keys.hpp).
inline Tensor operand_rows_for(const Tensor& t, const SdpaOptions& options, bool on_amx,
                               OperandValues values = OperandValues::kFloat32) {
  return with_contiguous_rows(as_product_operand(t, options, on_amx, values));
}

// The b, h, t element strides of a rank-4 view.
void copy_strides(const Tensor& t4, int64_t (&strides)[3]);

// q, k, v, out: rank-4 views with contiguous rows; mask4: broadcast_mask's view or undefined;
// logsumexp: (B, H, Tq) contiguous or nullptr. The problem points into these tensors' storage.
kernels::FlashProblem flash_problem(const AttentionDims& dims, const Tensor& q4, const Tensor& k4,
                                    const Tensor& v4, const Tensor& out4, const Tensor& mask4,
                                    const SdpaOptions& options, float* logsumexp);

// The same with the operands' pointers and strides (q, k, v, out and their *_words) left for
// the caller to set: for operands that are not float32 tensors (sdpa_bfloat16.cpp).
kernels::FlashProblem flash_problem_without_operands(const AttentionDims& dims, const Tensor& mask4,
                                                     const SdpaOptions& options, float* logsumexp);

// The scans of attn's policy for non-finite inputs (src/reference/finite.hpp) that the fused
// forward's and backward's tasks make on the rows they read (fused.hpp). True when rows
// [r0, r0 + rows) of head h of batch b, in a (B, H, T, width) view at `base` with b, h, t
// strides `stride`, hold NaN or ±inf (Element: float, or the words of bfloat16 tensors) …
template <class Element>
bool rows_non_finite(const Element* base, const int64_t (&stride)[3], int64_t b, int64_t h,
                     int64_t r0, int64_t rows, int64_t width) {
  return kernels::any_non_finite(base + b * stride[0] + h * stride[1] + r0 * stride[2], rows, width,
                                 stride[2]);
}
// … and when p's K or V rows [j0, j0 + rows) of K/V head (b, kv_h) do.
bool key_rows_non_finite(const kernels::FlashProblem& p, int64_t b, int64_t kv_h, int64_t j0,
                         int64_t rows);

}  // namespace attn::detail
