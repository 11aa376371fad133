// Element-wise sums of rows, vectorised with Highway: the residual stream's additions and the
// epilogues of the matrix products (a bias added to each row of C, the inner split's partial
// products added into C). As plain loops in their callers, compiled for the baseline (16-byte
// vectors), the three took 3.2 % of the samples of a small GPT step on an AVX-512 Xeon; here
// 2.5 % (what is left is reading the rows from L2).
#pragma once

#include <cstdint>

namespace attn::kernels {

// out[r·ld_out + c] = a[r·ld_a + c] + b[r·ld_b + c] for r < rows, c < cols. ld_b = 0 adds the
// same row b to every row (a bias). out may be a or b (each element is read before it is
// written); otherwise the rows must not overlap. Every element is one float addition, so the
// bits are those of the plain loop on any SIMD target.
void add_rows(const float* a, int64_t ld_a, const float* b, int64_t ld_b, int64_t rows,
              int64_t cols, float* out, int64_t ld_out);

}  // namespace attn::kernels
