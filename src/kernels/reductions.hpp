// Sums over a training step's buffers, vectorised with Highway. Each result depends only on
// its inputs, never on the thread count: the callers cut the work into fixed chunks.
#pragma once

#include <cstdint>

namespace attn::kernels {

// Σ x[i]² over [0, n), accumulated in double (the global gradient norm of clipping). The
// order of the additions is fixed by n and the vector width alone. The scalar loop it
// replaces was one serial chain of double additions, 2 % of a GPT training step.
double sum_of_squares(const float* x, int64_t n);

// sums[c] += Σ_r m[r·ld + c] for c in [0, cols), the rows added in order, one column per lane
// (so exactly the bits of the plain loop over rows): a bias gradient's column block.
void add_column_sums(const float* m, int64_t rows, int64_t cols, int64_t ld, float* sums);

// True when one of `rows` rows of `width` contiguous floats, `stride` floats apart, holds NaN
// or ±inf: the scan of attn's policy for non-finite inputs (src/reference/finite.hpp).
bool any_non_finite(const float* x, int64_t rows, int64_t width, int64_t stride);
// The same over bfloat16 words, `stride` words apart.
bool any_non_finite(const uint16_t* x, int64_t rows, int64_t width, int64_t stride);

// True when one of n contiguous floats is NaN or +inf (-inf is allowed): the scan of an
// additive mask, where -inf hides a key.
bool any_nan_or_plus_inf(const float* x, int64_t n);

}  // namespace attn::kernels
