// An explicit mask applied to one (keys × queries) block of transposed scores, for the fused
// kernels' MaskBlock (mask_block-inl.h): a boolean mask sets the hidden scores to -inf, an
// additive one adds its values (times the factor the scores carry). Vectorised per SIMD target.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/flash_problem.hpp"

namespace attn::kernels {

// st[c·ldq + r] for query q0 + r (r < rows) and key j0 + c (first ≤ c < cols), from p.mask.
void apply_explicit_mask(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                         int64_t j0, size_t first, size_t cols, float additive_scale, float* st,
                         size_t ldq);

}  // namespace attn::kernels
