// attn::gemm over oneDNN's sgemm (its JIT AVX-512 kernel reached about 90 % of the FMA peak
// on the AVX-512 Zen 5 of docs/performance.md; OpenBLAS runs its AVX2 kernel under this
// environment's OPENBLAS_CORETYPE=Haswell and stops near 100; Debian's BLIS runs generic C near
// 20).
//
// Threads: Debian's oneDNN uses OpenMP, whose default spin-wait collapses when the other core
// is busy. So the rows of C are split over the library's own blocking pool, and each worker
// calls sgemm with OpenMP limited to one thread (the worker's previous setting is restored).
// The split (gemm_split.hpp) depends on the shape and the machine's core count, never on
// set_num_threads, so the results are bitwise the same for 1 and 2 threads.
//
// Dtype::kBFloat16 runs each block through src/gemm_bf16 instead of sgemm.
//
// oneDNN is opened on the first product (onednn_library.hpp), not at program start.
#include "attn/gemm.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/core/machine_cores.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/add_rows.hpp"
#include "src/kernels/gemv.hpp"
#include "src/linalg/async_signals_held.hpp"
#include "src/linalg/gemm_bf16.hpp"
#include "src/linalg/gemm_split.hpp"
#include "src/linalg/onednn_library.hpp"

namespace attn {
namespace {

using detail::Block;
using detail::for_each_block;
using detail::gemv_by_slabs;
using detail::MatrixOperand;

// One product on this thread, with OpenMP limited to one thread meanwhile (the worker's
// setting restored after, also when it throws).
// (Float products take float operands only; bf16 ones either kind: gemm_bf16.hpp.)
void multiply_one_thread(Dtype precision, char ta, char tb, int64_t m, int64_t n, int64_t k,
                         float alpha, MatrixOperand a, MatrixOperand b, float beta, float* c,
                         int64_t ldc) {
  // One row against rows of B (a token's logits, B = wte): attn's kernel, no oneDNN. Its block
  // is a run of whole rows of B, read in order.
  if (m == 1 && ta == 'N' && tb == 'T' && precision == Dtype::kFloat32) {
    return kernels::gemv_dots(a.floats, b.floats, k, n, b.ld, alpha, beta, c);
  }
  const detail::OneOpenMpThread one_thread;
  const detail::AsyncSignalsHeld no_signal_frames_on_onednn_workspaces;
  if (precision == Dtype::kBFloat16) {
    detail::gemm_bf16_one_thread(ta, tb, m, n, k, alpha, a, b, beta, c, ldc);
    return;
  }
  const dnnl_status_t status =
      detail::onednn().sgemm(ta, tb, m, n, k, alpha, a.floats, a.ld, b.floats, b.ld, beta, c, ldc);
  ATTN_CHECK(status == dnnl_success, "gemm: oneDNN sgemm failed with status ",
             static_cast<int>(status));
}

// oneDNN 2.6's sgemm packs an untransposed B only for large blocks and otherwise reads it in
// place, where a leading dimension that is a multiple of 512 floats puts the rows of its panels
// in the same few cache sets: dnnl_sgemm on one Zen 2 core, K = 1024 or 4096, ran at 33-37
// GFLOP/s against 81-96 with ldb 16 floats longer, for every block with M < 512, N < 512, or
// M = N = 512 (from M·N = 512·1024 with both ≥ 512 it packs B: 91-96 either way). A model of
// width 1024, 2048 or 4096 has such weights. The block's B is then copied first into
// per-thread scratch whose rows are 16 floats longer: K·N floats copied against 2·M·K·N FLOPs,
// a few per cent from M = 32 on.
constexpr int64_t kAliasingLd = 512, kPaddedLd = 16;
bool copy_b_first(Dtype precision, char tb, int64_t rows, int64_t cols, int64_t ldb) {
  const bool packed_by_onednn = rows >= 512 && cols >= 512 && rows * cols >= 512 * 1024;
  return precision == Dtype::kFloat32 && tb == 'N' && ldb % kAliasingLd == 0 && rows >= 32 &&
         !packed_by_onednn;
}

// The block's product on this thread: row r0 of op(A) is row r0 of A, or column r0 when A is
// transposed; column c0 of op(B) likewise.
void multiply_block(const Block& x, Dtype precision, char ta, char tb, int64_t k, float alpha,
                    MatrixOperand a, MatrixOperand b, float beta, float* c, int64_t ldc) {
  const MatrixOperand a_block = a.moved(ta == 'T' ? x.r0 : x.r0 * a.ld);
  MatrixOperand b_block = b.moved(tb == 'T' ? x.c0 * b.ld : x.c0);
  if (copy_b_first(precision, tb, x.rows, x.cols, b.ld)) {
    thread_local std::vector<float> b_copy;
    const int64_t ld_copy = x.cols + kPaddedLd;
    b_copy.resize(static_cast<size_t>(k * ld_copy));
    for (int64_t r = 0; r < k; ++r) {
      const float* row = b_block.floats + r * b.ld;
      std::copy(row, row + x.cols, b_copy.data() + r * ld_copy);
    }
    b_block = MatrixOperand::of(b_copy.data(), ld_copy);
  }
  multiply_one_thread(precision, ta, tb, x.rows, x.cols, k, alpha, a_block, b_block, beta,
                      c + x.r0 * ldc + x.c0, ldc);
}

// The one-row case of gemm: a generated token's products.
bool is_gemv(int64_t m, bool trans_a, bool trans_b, Dtype precision) {
  return m == 1 && !trans_a && !trans_b && precision == Dtype::kFloat32;
}

// A weight's gradient xᵀ·dy has a small C and a long inner dimension (the batch's rows). Split
// over C's rows or columns, every worker packs the whole of one operand: 2 threads made the
// small GPT's xᵀ·dy products only 1.5x one thread (129 against 85 GFLOP/s on a Zen 2). Split
// over the inner dimension, each element is packed once (about 150 GFLOP/s). So when k is at
// least C's longer side, each core multiplies its own slice of k, the first straight into C and
// the others into scratch, and the scratch is then added into C slice by slice in order (a
// row at a time, over the threads). The slices depend on the core count only: 1 and 2 threads
// give the same bits.
bool inner_split_pays(int64_t m, int64_t n, int64_t k) {
  return k >= std::max(m, n) && m * n * k >= detail::kParallelThreshold &&
         k >= 2 * detail::kRowGrain;
}

void gemm_inner_split(Dtype precision, char ta, char tb, int64_t m, int64_t n, int64_t k,
                      float alpha, MatrixOperand a, MatrixOperand b, float beta, float* c,
                      int64_t ldc) {
  const int64_t cores = detail::machine_cores();
  const int64_t per_core = (k + cores - 1) / cores;
  const int64_t slice = (per_core + detail::kRowGrain - 1) / detail::kRowGrain * detail::kRowGrain;
  const int64_t slices = (k + slice - 1) / slice;
  // Not zeroed (each slice's product writes all of its partial, beta = 0): a memset here ran
  // on the calling thread alone while the other core waited.
  const auto partials =
      std::make_unique_for_overwrite<float[]>(static_cast<size_t>((slices - 1) * m * n));
  parallel_for(slices, [&](int64_t s) {
    const int64_t k0 = s * slice, inner = std::min(slice, k - k0);
    const MatrixOperand a_slice = a.moved(ta == 'T' ? k0 * a.ld : k0);
    const MatrixOperand b_slice = b.moved(tb == 'T' ? k0 : k0 * b.ld);
    if (s == 0) {
      multiply_one_thread(precision, ta, tb, m, n, inner, alpha, a_slice, b_slice, beta, c, ldc);
    } else {
      multiply_one_thread(precision, ta, tb, m, n, inner, alpha, a_slice, b_slice, 0.0f,
                          partials.get() + (s - 1) * m * n, n);
    }
  });
  detail::parallel_ranges(m, std::max<int64_t>(1, 16384 / n), [&](int64_t first, int64_t last) {
    float* rows = c + first * ldc;
    for (int64_t s = 1; s < slices; ++s) {  // each element adds the slices in slice order
      kernels::add_rows(rows, ldc, partials.get() + ((s - 1) * m + first) * n, n, last - first, n,
                        rows, ldc);
    }
  });
}

// The products of gemm and gemm_bias (bias set: beta is then 0) past their checks, over the
// threads: by slices of k where that pays (never with a bias), else by blocks of C.
void products(Dtype precision, char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha,
              MatrixOperand a, MatrixOperand b, float beta, float* c, int64_t ldc,
              const float* bias) {
  if (bias == nullptr && inner_split_pays(m, n, k)) {
    return gemm_inner_split(precision, ta, tb, m, n, k, alpha, a, b, beta, c, ldc);
  }
  // With a bias, each worker adds it to its own block right after multiplying into it (beta =
  // 0), while the block's last rows are still in its core's cache. Writing the bias first and
  // multiplying with beta = 1 had the product read the whole block back from memory: the small
  // GPT's training step (blocks of 0.2-0.6 MB) took 36.9-37.7 ms on two Zen 2 threads that
  // way and 34.1-36.3 this way; GPT-2's prompt (2.4 MB blocks) is the same either way.
  for_each_block(m, n, k, [&](const Block& x) {
    multiply_block(x, precision, ta, tb, k, alpha, a, b, beta, c, ldc);
    if (bias == nullptr) return;
    float* block = c + x.r0 * ldc + x.c0;
    kernels::add_rows(block, ldc, bias + x.c0, 0, x.rows, x.cols, block, ldc);
  });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          Dtype precision) {
  const detail::PhaseScope clock(Phase::kMatmul);
  detail::check_gemm_sizes("gemm", trans_a, trans_b, m, n, k, lda, ldb, ldc);
  check_float_dtype(precision, "gemm: precision");
  if (m == 0 || n == 0) return;
  if (is_gemv(m, trans_a, trans_b, precision))
    return gemv_by_slabs(n, k, alpha, a, b, ldb, beta, c);
  products(precision, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
           MatrixOperand::of(a, lda), MatrixOperand::of(b, ldb), beta, c, ldc, nullptr);
}

void gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, const float* bias, float* c, int64_t ldc,
               Dtype precision) {
  const detail::PhaseScope clock(Phase::kMatmul);
  detail::check_gemm_sizes("gemm", trans_a, trans_b, m, n, k, lda, ldb, ldc);
  check_float_dtype(precision, "gemm: precision");
  if (m == 0 || n == 0) return;
  if (is_gemv(m, trans_a, trans_b, precision)) {
    std::copy(bias, bias + n, c);
    return gemv_by_slabs(n, k, 1.0f, a, b, ldb, 1.0f, c);
  }
  products(precision, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f,
           MatrixOperand::of(a, lda), MatrixOperand::of(b, ldb), 0.0f, c, ldc, bias);
}

namespace detail {

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               MatrixOperand a, MatrixOperand b, float beta, float* c, int64_t ldc,
               const float* bias) {
  const PhaseScope clock(Phase::kMatmul);
  check_gemm_sizes("gemm (bf16)", trans_a, trans_b, m, n, k, a.ld, b.ld, ldc);
  ATTN_CHECK(bias == nullptr || beta == 0.0f, "gemm (bf16): a bias needs beta = 0");
  if (m == 0 || n == 0) return;
  products(Dtype::kBFloat16, trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, b, beta,
           c, ldc, bias);
}

}  // namespace detail

namespace {

// A matrix view as (pointer, transposed, leading dim) for gemm, copying when neither of its
// dims is contiguous.
struct GemmOperand {
  Tensor storage;
  bool transposed;
  int64_t ld;
};

GemmOperand as_operand(const Tensor& t) {
  if (t.strides()[1] == 1 && t.strides()[0] >= std::max<int64_t>(1, t.dim(1))) {
    return {t, false, t.strides()[0]};
  }
  if (t.strides()[0] == 1 && t.strides()[1] >= std::max<int64_t>(1, t.dim(0))) {
    return {t, true, t.strides()[1]};
  }
  const Tensor c = t.contiguous();
  return {c, false, c.dim(1)};
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  ATTN_CHECK(a.defined() && b.defined() && a.rank() == 2 && b.rank() == 2,
             "matmul needs two matrices, got ", a.defined() ? a.shape_string() : "undefined",
             " and ", b.defined() ? b.shape_string() : "undefined");
  ATTN_CHECK(a.dim(1) == b.dim(0), "matmul: inner dims differ: ", a.shape_string(), " · ",
             b.shape_string());
  const GemmOperand x = as_operand(a), y = as_operand(b);
  Tensor c({a.dim(0), b.dim(1)});
  gemm(x.transposed, y.transposed, a.dim(0), b.dim(1), a.dim(1), 1.0f, x.storage.data(), x.ld,
       y.storage.data(), y.ld, 0.0f, c.data(), b.dim(1));
  return c;
}

Tensor linear(const Tensor& x, const Tensor& w) {
  ATTN_CHECK(x.defined() && w.defined(), "linear: undefined input or weight");
  ATTN_CHECK(w.rank() == 2, "linear: weight must be (d_in, d_out), got ", w.shape_string());
  ATTN_CHECK(x.dim(-1) == w.dim(0), "linear: x ", x.shape_string(), " has d_in ", x.dim(-1),
             " but weight ", w.shape_string(), " expects ", w.dim(0));
  const Tensor rows = x.contiguous().reshape({-1, x.dim(-1)});
  Shape out_shape = x.shape();
  out_shape.back() = w.dim(1);
  return matmul(rows, w).reshape(out_shape);
}

}  // namespace attn
