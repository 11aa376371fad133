// See gemm_bf16.hpp: products with a weight matrix kept in bfloat16, split over the threads as
// the float products are (gemm_split.hpp), each block computed as for float weights holding
// the same values.
#include <algorithm>
#include <vector>

#include "attn/bfloat16.hpp"
#include "attn/error.hpp"
#include "src/core/phase_scope.hpp"
#include "src/core/simd_cap.hpp"
#include "src/kernels/gemv.hpp"
#include "src/linalg/async_signals_held.hpp"
#include "src/linalg/gemm_bf16.hpp"
#include "src/linalg/gemm_dpbf16.hpp"
#include "src/linalg/gemm_split.hpp"
#include "src/linalg/onednn_library.hpp"

namespace attn::detail {
namespace {

// Columns of B widened at a time for the float product (at most 4 MiB of floats for k = 1024).
constexpr int64_t kWidenColumns = 1024;

// The floats of a (rows, cols) block of row-major bf16 with row stride ld, written contiguous.
void widen_block(const uint16_t* bits, int64_t rows, int64_t cols, int64_t ld, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = bits + r * ld;
    float* o = out + r * cols;
    for (int64_t j = 0; j < cols; ++j) o[j] = from_bfloat16(row[j]);
  }
}

// The block's product on this thread. One row against rows of B (a token's logits against
// wte) is a run of dot products over whole rows of B. More rows: B's bf16 values widened to
// floats, kWidenColumns columns at a time, and oneDNN's sgemm over them, as for float weights.
void multiply_block(const Block& x, bool trans_b, int64_t k, float alpha, const float* a,
                    int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) {
  const float* a_block = a + x.r0 * lda;
  const uint16_t* b_block = trans_b ? b + x.c0 * ldb : b + x.c0;
  float* c_block = c + x.r0 * ldc + x.c0;
  if (x.rows == 1 && trans_b) {
    kernels::gemv_dots(a_block, b_block, k, x.cols, ldb, alpha, beta, c_block);
    return;
  }
  const OneOpenMpThread one_thread;
  const AsyncSignalsHeld no_signal_frames_on_onednn_workspaces;
  // With AMX, oneDNN's bf16 kernel on A rounded to bf16 (as llama.cpp and a bf16 PyTorch model
  // round activations): 2.2-2.8x its sgemm on GPT-2's prompt shapes (design.md).
  if (amx_bf16_usable() && gemm_bf16_weights_one_thread(trans_b, x.rows, x.cols, k, alpha, a_block,
                                                        lda, b_block, ldb, beta, c_block, ldc))
    return;
  // Without AMX, on AVX-512 BF16 where vdpbf16ps outruns the FMA (AMD's), the same rounding of
  // the rows on its register tiles.
  if (dpbf16_usable())
    return gemm_dpbf16_one_thread(trans_b, x.rows, x.cols, k, alpha, a_block, lda, b_block, ldb,
                                  beta, c_block, ldc);
  thread_local std::vector<float> wide;
  for (int64_t j = 0; j < x.cols; j += kWidenColumns) {
    const int64_t cols = std::min(kWidenColumns, x.cols - j);
    wide.resize(static_cast<size_t>(cols * k));
    // B (n, k) when transposed: the piece is `cols` whole rows; else (k, n): `cols` of each row.
    if (trans_b) {
      widen_block(b_block + j * ldb, cols, k, ldb, wide.data());
    } else {
      widen_block(b_block + j, k, cols, ldb, wide.data());
    }
    const dnnl_status_t status =
        onednn().sgemm('N', trans_b ? 'T' : 'N', x.rows, cols, k, alpha, a_block, lda, wide.data(),
                       trans_b ? k : cols, beta, c_block + j, ldc);
    ATTN_CHECK(status == dnnl_success, "gemm (bf16 weights): oneDNN sgemm failed with status ",
               static_cast<int>(status));
  }
}

}  // namespace

void gemm_bf16_weights(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                       int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                       int64_t ldc) {
  const PhaseScope clock(Phase::kMatmul);
  check_gemm_sizes("gemm (bf16 weights)", false, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (m == 1 && !trans_b) return gemv_by_slabs(n, k, alpha, a, b, ldb, beta, c);
  for_each_block(m, n, k, [&](const Block& x) {
    multiply_block(x, trans_b, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

void gemm_bias_bf16_weights(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                            int64_t lda, const uint16_t* b, int64_t ldb, const float* bias,
                            float* c, int64_t ldc) {
  const PhaseScope clock(Phase::kMatmul);
  check_gemm_sizes("gemm (bf16 weights)", false, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (m == 1 && !trans_b) {
    std::copy(bias, bias + n, c);
    return gemv_by_slabs(n, k, 1.0f, a, b, ldb, 1.0f, c);
  }
  // Each worker writes the bias into its own block just before multiplying into it.
  for_each_block(m, n, k, [&](const Block& x) {
    for (int64_t r = x.r0; r < x.r0 + x.rows; ++r) {
      std::copy(bias + x.c0, bias + x.c0 + x.cols, c + r * ldc + x.c0);
    }
    multiply_block(x, trans_b, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc);
  });
}

}  // namespace attn::detail
