// Matrix products on Intel's AMX tiles (Sapphire Rapids and later): the bf16 products of the
// fused attention forward when the CPU has AMX-BF16 (detail::amx_bf16_usable).
//
// Why AMX and not vdpbf16ps: on an Emerald Rapids Xeon a loop of independent vdpbf16ps ran at
// 85 GFLOP/s on one core, half of the 171 of vfmadd231ps (one vdpbf16ps every 2 cycles), so
// AVX-512 BF16 would make attention slower there; a loop of tdpbf16ps ran at 2.2–2.4 TFLOP/s.
// (On a Zen 4/5, which has no AMX, vdpbf16ps runs at twice the FMA rate: dpbf16_tiles.hpp runs
// this operation, on these layouts, with it.)
//
// One operation, C (m × n floats) = or += A·B, where every tile is 16 rows × 64 bytes:
//   - A: m rows of bfloat16 along the reduction, row-major, `lda` elements apart;
//   - B: the reduction in pairs: pair-row k holds, for each column j, the two bfloat16
//     (B[2k][j], B[2k+1][j]) side by side — `ldb` columns of pairs per pair-row;
//   - C: floats, row-major, `ldc` apart.
// m and n are multiples of 16, the reduction a multiple of 32 (callers pad with zeros).
// Only bf16 products of exact bf16 values are formed; tdpbf16ps adds them into float32 with
// round-to-nearest-even, and treats bf16 subnormals as zero.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn::kernels {

// Loads the tile configuration this file uses on the calling thread; amx_end releases the
// tiles (their 8 KiB of state) again. Call both on the thread that runs amx_product.
void amx_begin();
void amx_end();

// C = A·B (accumulate: C += A·B) over m_tiles·16 rows and n_tiles·16 columns, the reduction
// over `chunks` chunks of 32 — or, where chunks_per_tile is given, over chunks_per_tile[j] for
// the columns [16j, 16j + 16) (a causal block's early queries see fewer keys: their B pairs
// past them are zero and need not be read).
void amx_product(bool accumulate, const uint16_t* a, size_t lda, size_t m_tiles, const uint16_t* b,
                 size_t ldb, size_t n_tiles, size_t chunks, const size_t* chunks_per_tile, float* c,
                 size_t ldc);

}  // namespace attn::kernels
