// The packed bf16 products of attention (amx_tiles.hpp's operation, with its operands' layout)
// on AVX-512 BF16's vdpbf16ps, for CPUs that have it and no AMX (AMD Zen 4 and 5): each
// instruction adds, in each of 16 float lanes, the products of one pair of bfloat16 — the
// operands' pair layout is the one vdpbf16ps reads, so the AMX route's packing serves both.
//
// A register tile is 16 rows of C × one vector of 16 columns: per pair-row of B, one vector
// load of B, and for each row one broadcast of A's pair into a vdpbf16ps — 16 independent
// accumulators. On a Zen 4 or 5 vdpbf16ps has twice the FMA's rate in products; on an Intel
// Xeon it has half the rate of its FMA in instructions (amx_tiles.hpp), which has AMX instead.
// Rounding: every product of two bf16 is exact; the pair's sum and its addition are float32,
// bf16 subnormals read as zero (as the tiles). Internal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/amx_tiles.hpp"

namespace attn::kernels {

// amx_product's operation, arguments and layouts (amx_tiles.hpp) on vdpbf16ps. Only on a CPU
// with AVX-512 BF16 (detail::dpbf16_usable); needs no begin or end.
void dpbf16_product(bool accumulate, const uint16_t* a, size_t lda, size_t m_tiles,
                    const uint16_t* b, size_t ldb, size_t n_tiles, size_t chunks,
                    const size_t* chunks_per_tile, float* c, size_t ldc);

// The product on the instructions the call chose (FlashProblem::amx_tiles): AMX tiles (between
// amx_begin and amx_end) or vdpbf16ps.
inline void packed_product(bool amx_tiles, bool accumulate, const uint16_t* a, size_t lda,
                           size_t m_tiles, const uint16_t* b, size_t ldb, size_t n_tiles,
                           size_t chunks, const size_t* chunks_per_tile, float* c, size_t ldc) {
  if (amx_tiles) {
    amx_product(accumulate, a, lda, m_tiles, b, ldb, n_tiles, chunks, chunks_per_tile, c, ldc);
  } else {
    dpbf16_product(accumulate, a, lda, m_tiles, b, ldb, n_tiles, chunks, chunks_per_tile, c, ldc);
  }
}

}  // namespace attn::kernels
