// AMX tile products (amx_tiles.hpp). The tile registers are named by number in each
// instruction, so the 2 × 2 block of C tiles and its smaller edges are spelled out:
//   tmm0..3: C (row tile i, column tile j) = tmm(2i + j);  tmm4, tmm5: A;  tmm6, tmm7: B.
// Per chunk of 32 along the reduction, a 2 × 2 block loads 4 tiles for 4 tdpbf16ps.
#include "src/kernels/amx_tiles.hpp"

#include <algorithm>
#include <cstdlib>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace attn::kernels {

#if defined(__x86_64__)

namespace {

// Palette 1: every tile 16 rows of 64 bytes (16 floats, or 32 bfloat16).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

constexpr size_t kTile = 16;   // rows (and float columns) of a tile
constexpr size_t kChunk = 32;  // bfloat16 along the reduction per tile row

// One block of MT × NT C tiles (1 or 2 each) over `chunks` chunks of the reduction.
template <int MT, int NT>
__attribute__((target("amx-tile,amx-bf16"))) void Block(bool accumulate, const uint16_t* a,
                                                        size_t lda, const uint16_t* b, size_t ldb,
                                                        size_t chunks, float* c, size_t ldc) {
  const size_t c_stride = ldc * sizeof(float);
  float* c1 = c + kTile;        // column tile 1
  float* c2 = c + kTile * ldc;  // row tile 1
  float* c3 = c + kTile * ldc + kTile;
  if (accumulate) {
    _tile_loadd(0, c, c_stride);
    if constexpr (NT == 2) _tile_loadd(1, c1, c_stride);
    if constexpr (MT == 2) _tile_loadd(2, c2, c_stride);
    if constexpr (MT == 2 && NT == 2) _tile_loadd(3, c3, c_stride);
  } else {
    _tile_zero(0);
    if constexpr (NT == 2) _tile_zero(1);
    if constexpr (MT == 2) _tile_zero(2);
    if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  }
  const size_t a_stride = lda * sizeof(uint16_t), b_stride = 2 * ldb * sizeof(uint16_t);
  for (size_t k = 0; k < chunks; ++k) {
    const uint16_t* ak = a + k * kChunk;
    const uint16_t* bk = b + k * kTile * 2 * ldb;  // 16 pair-rows per chunk
    _tile_loadd(4, ak, a_stride);
    if constexpr (MT == 2) _tile_loadd(5, ak + kTile * lda, a_stride);
    _tile_loadd(6, bk, b_stride);
    if constexpr (NT == 2) _tile_loadd(7, bk + 2 * kTile, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MT == 2 && NT == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, c_stride);
  if constexpr (NT == 2) _tile_stored(1, c1, c_stride);
  if constexpr (MT == 2) _tile_stored(2, c2, c_stride);
  if constexpr (MT == 2 && NT == 2) _tile_stored(3, c3, c_stride);
}

template <int MT>
void RowTiles(bool accumulate, const uint16_t* a, size_t lda, const uint16_t* b, size_t ldb,
              size_t n_tiles, size_t chunks, const size_t* chunks_per_tile, float* c, size_t ldc) {
  auto reach = [&](size_t j) { return chunks_per_tile ? chunks_per_tile[j] : chunks; };
  size_t j = 0;
  for (; j + 2 <= n_tiles; j += 2) {
    const size_t both = std::max(reach(j), reach(j + 1));
    if (accumulate && both == 0) continue;
    Block<MT, 2>(accumulate, a, lda, b + j * 2 * kTile, ldb, both, c + j * kTile, ldc);
  }
  if (j < n_tiles && !(accumulate && reach(j) == 0))
    Block<MT, 1>(accumulate, a, lda, b + j * 2 * kTile, ldb, reach(j), c + j * kTile, ldc);
}

}  // namespace

__attribute__((target("amx-tile"))) void amx_begin() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void amx_end() { _tile_release(); }

void amx_product(bool accumulate, const uint16_t* a, size_t lda, size_t m_tiles, const uint16_t* b,
                 size_t ldb, size_t n_tiles, size_t chunks, const size_t* chunks_per_tile, float* c,
                 size_t ldc) {
  size_t i = 0;
  for (; i + 2 <= m_tiles; i += 2) {
    RowTiles<2>(accumulate, a + i * kTile * lda, lda, b, ldb, n_tiles, chunks, chunks_per_tile,
                c + i * kTile * ldc, ldc);
  }
  if (i < m_tiles) {
    RowTiles<1>(accumulate, a + i * kTile * lda, lda, b, ldb, n_tiles, chunks, chunks_per_tile,
                c + i * kTile * ldc, ldc);
  }
}

#else  // no AMX off x86-64: amx_bf16_usable() is false there, so these are never called

void amx_begin() { std::abort(); }
void amx_end() { std::abort(); }
void amx_product(bool, const uint16_t*, size_t, size_t, const uint16_t*, size_t, size_t, size_t,
                 const size_t*, float*, size_t) {
  std::abort();
}

#endif

}  // namespace attn::kernels
