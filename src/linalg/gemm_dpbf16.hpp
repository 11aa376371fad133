// A block of a product with bfloat16 weights on AVX-512 BF16's vdpbf16ps (AMD Zen 4 and 5,
// which have it at twice the FMA's rate in products and no AMX), on the calling thread: the
// rows rounded to bfloat16 as on AMX (design.md, "bf16 weights"), the weights repacked into
// the pairs vdpbf16ps reads, and dpbf16_tiles.hpp's register tiles over them. Internal.
#pragma once

#include <cstdint>

namespace attn::detail {

// C = alpha·bf16(A)·op(B) + beta·C, A (m, k) floats row-major, B bfloat16 (k, n), or (n, k)
// when trans_b: every product of two bfloat16 exact, summed in float32 two at a time. Only
// where dpbf16_usable() (simd_cap.hpp).
void gemm_dpbf16_one_thread(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                            float* c, int64_t ldc);

}  // namespace attn::detail
