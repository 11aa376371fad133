// The one register-tiled matrix product the attention kernels are made of, compiled once per
// Highway target (include it after hwy/foreach_target.h, as simd_common-inl.h):
//
//   C[rows × vectors·N] (= or +=) A · B,   A(i, t) = a[i·a_row + t·a_col],  t < inner,
//                                          B(t, ·) = b[t·ldb …],  C(i, ·) = c[i·ldc …]
//
// A is read element by element and broadcast, so it may be any strided view (a row-major
// block, or the transpose of one) and is never packed; B and C are read as whole vectors,
// so their rows must hold vectors·N floats (padded where the logical width is less). The
// forward's two products and the backward's five are all this shape with different strides:
// e.g. Sᵀ = K·(scale·Q)ᵀ is A = K rows (a_row = ldk, a_col = 1), B = packed Qᵀ; and
// O += P·V with P stored transposed is A = Pᵀ read across (a_row = 1, a_col = ldp), B = V.
//
// Tiles: kTileRows rows of C × up to kTileVectors vectors. With AVX-512 that is 6 × 4 = 24
// accumulators + 4 loads of B + 1 broadcast of the 32 registers: 24 FMAs per 5 loads. AVX2's
// 3 × 4 needs 17 of its 16 (GCC takes one B operand from memory); 6 × 2 and 4 × 3, which fit,
// measured the same on a Zen 4, and 6 × 2 slower on a Zen 3 (the causal forward at T = 256
// 60 → 54 % of the peak, the backward at T = 1024 64 → 56 %: docs/performance.md), so the
// shape stays.
#if defined(ATTN_KERNELS_TILE_PRODUCT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_TILE_PRODUCT_INL_H_
#undef ATTN_KERNELS_TILE_PRODUCT_INL_H_
#else
#define ATTN_KERNELS_TILE_PRODUCT_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

constexpr size_t kTileRows = HWY_MAX_BYTES >= 64 ? 6 : 3;
constexpr size_t kTileVectors = 4;

// One register tile: MR rows of C × NV vectors.
template <size_t MR, size_t NV, bool kAccumulate>
HWY_INLINE void ProductTile(const float* HWY_RESTRICT a, size_t a_row, size_t a_col, size_t inner,
                            const float* HWY_RESTRICT b, size_t ldb, float* HWY_RESTRICT c,
                            size_t ldc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[MR][NV];
#pragma GCC unroll 8
  for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) {
      acc[i][v] = kAccumulate ? hn::LoadU(df, c + i * ldc + v * N) : hn::Zero(df);
    }
  for (size_t t = 0; t < inner; ++t) {
    VF bt[NV];
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) bt[v] = hn::LoadU(df, b + t * ldb + v * N);
#pragma GCC unroll 8
    for (size_t i = 0; i < MR; ++i) {
      const VF ai = hn::Set(df, a[i * a_row + t * a_col]);
#pragma GCC unroll 4
      for (size_t v = 0; v < NV; ++v) acc[i][v] = hn::MulAdd(ai, bt[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (size_t i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (size_t v = 0; v < NV; ++v) hn::StoreU(acc[i][v], df, c + i * ldc + v * N);
}

// MR rows of C: chunks of kTileVectors vectors, then the remaining 1–3.
template <size_t MR, bool kAccumulate>
HWY_INLINE void ProductRows(const float* a, size_t a_row, size_t a_col, size_t inner,
                            const float* b, size_t ldb, float* c, size_t ldc, size_t vectors) {
  const size_t N = hn::Lanes(DF());
  size_t x = 0;
  for (; x + kTileVectors <= vectors; x += kTileVectors) {
    ProductTile<MR, kTileVectors, kAccumulate>(a, a_row, a_col, inner, b + x * N, ldb, c + x * N,
                                               ldc);
  }
  switch (vectors - x) {
    case 3:
      ProductTile<MR, 3, kAccumulate>(a, a_row, a_col, inner, b + x * N, ldb, c + x * N, ldc);
      break;
    case 2:
      ProductTile<MR, 2, kAccumulate>(a, a_row, a_col, inner, b + x * N, ldb, c + x * N, ldc);
      break;
    case 1:
      ProductTile<MR, 1, kAccumulate>(a, a_row, a_col, inner, b + x * N, ldb, c + x * N, ldc);
      break;
    default:
      break;
  }
}

// The whole product: tiles of kTileRows rows, then the remaining rows in one smaller tile.
template <bool kAccumulate>
HWY_INLINE void TileProduct(size_t rows, size_t vectors, const float* a, size_t a_row, size_t a_col,
                            size_t inner, const float* b, size_t ldb, float* c, size_t ldc) {
  size_t r = 0;
  for (; r + kTileRows <= rows; r += kTileRows) {
    ProductRows<kTileRows, kAccumulate>(a + r * a_row, a_row, a_col, inner, b, ldb, c + r * ldc,
                                        ldc, vectors);
  }
  const float* ar = a + r * a_row;
  float* cr = c + r * ldc;
  switch (rows - r) {
    case 5:
      ProductRows<5, kAccumulate>(ar, a_row, a_col, inner, b, ldb, cr, ldc, vectors);
      break;
    case 4:
      ProductRows<4, kAccumulate>(ar, a_row, a_col, inner, b, ldb, cr, ldc, vectors);
      break;
    case 3:
      ProductRows<3, kAccumulate>(ar, a_row, a_col, inner, b, ldb, cr, ldc, vectors);
      break;
    case 2:
      ProductRows<2, kAccumulate>(ar, a_row, a_col, inner, b, ldb, cr, ldc, vectors);
      break;
    case 1:
      ProductRows<1, kAccumulate>(ar, a_row, a_col, inner, b, ldb, cr, ldc, vectors);
      break;
    default:
      break;
  }
}

// The same product where a causal diagonal crosses C, `cut` being the pair's DiagonalCut
// (block_visibility.hpp): the tile of rows from r on leaves out what lies above the diagonal.
// Each C element computed is TileProduct's, less terms that are 0 (at most the sign of a zero
// result can differ).
//
// Rows are keys and C's lanes queries (Sᵀ, dPᵀ): the tile covers only the query vectors from
// the one holding the first query that sees key r (the caller masks the lanes before it).
template <bool kAccumulate, class Cut>
HWY_INLINE void TileProductFromVector(const Cut& cut, size_t rows, size_t vectors, const float* a,
                                      size_t a_row, size_t a_col, size_t inner, const float* b,
                                      size_t ldb, float* c, size_t ldc) {
  const size_t N = hn::Lanes(DF());
  for (size_t r = 0; r < rows; r += kTileRows) {
    const size_t tile = rows - r < kTileRows ? rows - r : kTileRows;
    const size_t first = cut.first_query_seeing(r) / N;
    const size_t skip = first < vectors ? first : vectors;
    TileProduct<kAccumulate>(tile, vectors - skip, a + r * a_row, a_row, a_col, inner, b + skip * N,
                             ldb, c + r * ldc + skip * N, ldc);
  }
}

// Rows are keys and the inner terms queries (dV = Pᵀ·dO, dK = dSᵀ·Q): the tile's terms start
// at the first query that sees key r (A is 0 before).
template <bool kAccumulate, class Cut>
HWY_INLINE void TileProductFromTerm(const Cut& cut, size_t rows, size_t vectors, const float* a,
                                    size_t a_row, size_t a_col, size_t inner, const float* b,
                                    size_t ldb, float* c, size_t ldc) {
  for (size_t r = 0; r < rows; r += kTileRows) {
    const size_t tile = rows - r < kTileRows ? rows - r : kTileRows;
    const size_t first = cut.first_query_seeing(r);
    const size_t t0 = first < inner ? first : inner;
    TileProduct<kAccumulate>(tile, vectors, a + r * a_row + t0 * a_col, a_row, a_col, inner - t0,
                             b + t0 * ldb, ldb, c + r * ldc, ldc);
  }
}

// Rows are queries and the inner terms keys (O += P·V, dQ += dS·K): the tile's terms stop at
// the last key its last row sees (A is 0 after). B is a whole key block here (V or K: 128 keys
// × 64 floats, 32 KiB, as much as an L1), re-read by every tile of rows, so the keys go in
// chunks of kTermChunk, each a 16 KiB slice of B that stays in L1 with the lines of A while
// the tiles pass. Each element still sums its terms in order (a chunk's sum is stored and
// reloaded exactly), so the result is the same to the bit.
constexpr size_t kTermChunk = 64;

// Every tile of rows over terms [t0, t0 + kTermChunk), as far as its last row sees. A tile that
// sees none of them is skipped when accumulating; otherwise it is written (0 where it sees none).
template <bool kAccumulate, class Cut>
HWY_INLINE void TermChunk(const Cut& cut, size_t t0, size_t rows, size_t vectors, const float* a,
                          size_t a_row, size_t a_col, const float* b, size_t ldb, float* c,
                          size_t ldc) {
  for (size_t r = 0; r < rows; r += kTileRows) {
    const size_t tile = rows - r < kTileRows ? rows - r : kTileRows;
    const size_t seen = cut.keys_seen_by(r + tile);
    const size_t end = seen < t0 + kTermChunk ? seen : t0 + kTermChunk;
    const size_t inner = end > t0 ? end - t0 : 0;
    if (kAccumulate && inner == 0) continue;
    TileProduct<kAccumulate>(tile, vectors, a + r * a_row + t0 * a_col, a_row, a_col, inner,
                             b + t0 * ldb, ldb, c + r * ldc, ldc);
  }
}

template <bool kAccumulate, class Cut>
HWY_INLINE void TileProductToTerm(const Cut& cut, size_t rows, size_t vectors, const float* a,
                                  size_t a_row, size_t a_col, const float* b, size_t ldb, float* c,
                                  size_t ldc) {
  TermChunk<kAccumulate>(cut, 0, rows, vectors, a, a_row, a_col, b, ldb, c, ldc);
  const size_t terms = cut.keys_seen_by(rows);
  for (size_t t0 = kTermChunk; t0 < terms; t0 += kTermChunk) {
    TermChunk<true>(cut, t0, rows, vectors, a, a_row, a_col, b, ldb, c, ldc);
  }
}

// The keys a vector of query lanes from row r on needs its element-wise values (P, dS) for,
// when TileProductToTerm/FromTerm read them: those any of its rows sees, plus kTileRows more
// (masked, so their values come out 0), because a tile of kTileRows rows may start in the
// vector before and run to the keys its last row sees.
template <class Cut>
HWY_INLINE size_t KeysForQueryVector(const Cut& cut, size_t r) {
  return cut.keys_seen_by(r + hn::Lanes(DF()) + kTileRows);
}

// Calls at(offset) for every vector of an Sᵀ-shaped block (keys × ldq query lanes) that the
// products read: offset = c·ldq + r for each query vector r and its keys c < KeysForQueryVector.
// For the element-wise passes that need nothing per query vector.
template <class Cut, class At>
HWY_INLINE void ForEachNeededVector(const Cut& cut, size_t ldq, const At& at) {
  const size_t N = hn::Lanes(DF());
  for (size_t r = 0; r < ldq; r += N) {
    const size_t cols = KeysForQueryVector(cut, r);
    for (size_t c = 0; c < cols; ++c) at(c * ldq + r);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
