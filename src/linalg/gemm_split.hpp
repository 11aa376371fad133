// What the float products (gemm.cpp) and the products with bfloat16 weights
// (gemm_bf16_weights.cpp) share: the argument checks, and how a product is shared out over the
// threads. Internal to the library.
//
// The split depends on the shape and the machine's core count, never on set_num_threads:
// oneDNN's blocking (and so its rounding) changes with the size of the block it is given
// (seen on an AVX2 machine), so the same blocks are computed whatever the thread count and
// the results are bitwise the same for 1 and 2 threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/core/machine_cores.hpp"
#include "src/kernels/gemv.hpp"

namespace attn::detail {

// The sizes and leading dimensions of C = alpha·op(A)·op(B) + beta·C, row-major: an
// attn::Error starting with `what` when one is negative or a leading dimension too small.
inline void check_gemm_sizes(const char* what, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  ATTN_CHECK(m >= 0 && n >= 0 && k >= 0, what, ": sizes must be >= 0, got m=", m, " n=", n,
             " k=", k);
  ATTN_CHECK(lda >= std::max<int64_t>(1, trans_a ? m : k) &&
                 ldb >= std::max<int64_t>(1, trans_b ? k : n) && ldc >= std::max<int64_t>(1, n),
             what, ": leading dimensions too small: lda=", lda, " ldb=", ldb, " ldc=", ldc,
             " for m=", m, " n=", n, " k=", k);
}

// Below this many multiply-adds a product runs on the calling thread alone: handing it to
// the pool would cost more than it saves.
constexpr int64_t kParallelThreshold = int64_t{1} << 18;

// Row blocks are multiples of this, so each worker's block matches the kernel's tiles.
constexpr int64_t kRowGrain = 16;

// One block of C: rows [r0, r0 + rows) and columns [c0, c0 + cols).
struct Block {
  int64_t r0, rows, c0, cols;
};

// Runs block(b) over the blocks of an (m, n) product with inner size k: the whole of C on the
// calling thread when it is small, else one block per core (splitting the longer of C's dims,
// so each worker reads half of one operand), in multiples of kRowGrain.
template <class BlockFn>
void for_each_block(int64_t m, int64_t n, int64_t k, const BlockFn& block) {
  const int64_t cores = machine_cores();
  const int64_t blocks = std::min<int64_t>(cores, (std::max(m, n) + kRowGrain - 1) / kRowGrain);
  if (m * n * k < kParallelThreshold || blocks <= 1) {
    block(Block{0, m, 0, n});
    return;
  }
  if (n > m) {
    const int64_t cols = (n / blocks + kRowGrain - 1) / kRowGrain * kRowGrain;
    parallel_for((n + cols - 1) / cols, [&](int64_t i) {
      block(Block{0, m, i * cols, std::min(cols, n - i * cols)});
    });
    return;
  }
  const int64_t rows = (m / blocks + kRowGrain - 1) / kRowGrain * kRowGrain;
  parallel_for((m + rows - 1) / rows, [&](int64_t i) {
    block(Block{i * rows, std::min(rows, m - i * rows), 0, n});
  });
}

// Rows of W per slab of x·W for one row x.
constexpr int64_t kSlabRows = 128;

// y = alpha·x·W + beta·y for one row x and W (k, n) not transposed, W float or bfloat16: the
// product of a generated token, bound by reading W. Each worker streams whole slabs of W's
// rows — one run of addresses each — into partial sums, added slab by slab in order: the same
// bits for every thread count. (Splitting the columns instead, as for_each_block does, reads
// every row in pieces.)
template <class W>
void gemv_by_slabs(int64_t n, int64_t k, float alpha, const float* x, const W* w, int64_t ldw,
                   float beta, float* y) {
  const int64_t slabs = (k + kSlabRows - 1) / kSlabRows;
  if (slabs <= 1 || n * k < kParallelThreshold) {
    kernels::gemv_rows(x, w, k, n, ldw, alpha, beta, y);
    return;
  }
  std::vector<float> partial(static_cast<size_t>(slabs * n));
  parallel_for(slabs, [&](int64_t s) {
    const int64_t r0 = s * kSlabRows, rows = std::min(kSlabRows, k - r0);
    kernels::gemv_rows(x + r0, w + r0 * ldw, rows, n, ldw, 1.0f, 0.0f, partial.data() + s * n);
  });
  // Slab by slab into the first, a row at a time (so the loop vectorises); every y[j] adds its
  // slabs in the same order.
  float* sum = partial.data();
  for (int64_t s = 1; s < slabs; ++s) {
    const float* p = partial.data() + s * n;
    for (int64_t j = 0; j < n; ++j) sum[j] += p[j];
  }
  for (int64_t j = 0; j < n; ++j)
    y[j] = beta == 0.0f ? alpha * sum[j] : alpha * sum[j] + beta * y[j];
}

}  // namespace attn::detail
