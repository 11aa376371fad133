// vdpbf16ps register tiles (dpbf16_tiles.hpp). Not a Highway kernel: Highway 1.0 has no target
// with AVX-512 BF16, so the function is compiled for it by a target attribute and called only
// where the CPU has it.
#include "src/kernels/dpbf16_tiles.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace attn::kernels {

#if defined(__x86_64__)

namespace {

constexpr size_t kTile = 16;   // rows and float columns of a tile of C
constexpr size_t kChunk = 32;  // bfloat16 along the reduction per chunk: 16 pair-rows

// C (16 rows × 16 columns, ldc apart) = or += A·B over `pair_rows` pairs of the reduction: A's
// rows `lda` bf16 apart, their pairs side by side; B's pair-row k a vector of 16 pairs, `ldb`
// pairs after pair-row k − 1.
//
// A's 16 rows are addressed from two pointers (rows 0 and 8) plus the offsets of rows 1 to 7,
// which both share: with a pointer per row GCC ran out of integer registers and reloaded
// addresses from vector registers and the stack inside the loop, and the tile ran at 86 % of
// vdpbf16ps's rate on a Zen 4 instead of 97 % (docs/performance.md).
__attribute__((target("avx512f,avx512bf16"))) void Tile(bool accumulate, const uint16_t* a,
                                                        size_t lda, const uint16_t* b, size_t ldb,
                                                        size_t pair_rows, float* c, size_t ldc) {
  __m512 acc[kTile];
#pragma GCC unroll 16
  for (size_t i = 0; i < kTile; ++i)
    acc[i] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
  const size_t row = lda * sizeof(uint16_t);  // bytes from one row of A to the next
  const size_t offsets[8] = {0, row, 2 * row, 3 * row, 4 * row, 5 * row, 6 * row, 7 * row};
  const char* top = reinterpret_cast<const char*>(a);  // row 0's pair k
  const char* bottom = top + 8 * row;                  // row 8's
  for (size_t k = 0; k < pair_rows; ++k) {
    const auto bk = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + k * 2 * ldb));
#pragma GCC unroll 16
    for (size_t i = 0; i < kTile; ++i) {
      uint32_t pair;  // A's elements 2k and 2k + 1 of row i
      std::memcpy(&pair, (i < 8 ? top : bottom) + offsets[i % 8], sizeof pair);
      const auto ak = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
      acc[i] = _mm512_dpbf16_ps(acc[i], ak, bk);
    }
    top += sizeof(uint32_t);
    bottom += sizeof(uint32_t);
  }
#pragma GCC unroll 16
  for (size_t i = 0; i < kTile; ++i) _mm512_storeu_ps(c + i * ldc, acc[i]);
}

}  // namespace

void dpbf16_product(bool accumulate, const uint16_t* a, size_t lda, size_t m_tiles,
                    const uint16_t* b, size_t ldb, size_t n_tiles, size_t chunks,
                    const size_t* chunks_per_tile, float* c, size_t ldc) {
  // Column tile by column tile, so that its strip of B stays in L1 for every row tile.
  for (size_t j = 0; j < n_tiles; ++j) {
    const size_t reach = chunks_per_tile != nullptr ? chunks_per_tile[j] : chunks;
    if (accumulate && reach == 0) continue;
    for (size_t i = 0; i < m_tiles; ++i) {
      Tile(accumulate, a + i * kTile * lda, lda, b + j * 2 * kTile, ldb, reach * (kChunk / 2),
           c + i * kTile * ldc + j * kTile, ldc);
    }
  }
}

#else  // off x86-64 dpbf16_usable() is false, so this is never called

void dpbf16_product(bool, const uint16_t*, size_t, size_t, const uint16_t*, size_t, size_t, size_t,
                    const size_t*, float*, size_t) {
  std::abort();
}

#endif

}  // namespace attn::kernels
