// See gemm_dpbf16.hpp. The operands are brought into dpbf16_product's layouts (amx_tiles.hpp):
// A's rows rounded to bfloat16 and padded to whole tiles with zeros, B's rows taken two at a
// time into 32-bit pairs. The product then runs over the reduction in slices of kDepth, so
// that a slice of a panel of B (16 KiB) stays in L1 while every row tile of A passes it.
#include "src/linalg/gemm_dpbf16.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "src/kernels/bfloat16_pack.hpp"
#include "src/kernels/dpbf16_tiles.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace attn::detail {
namespace {

constexpr int64_t kTile = 16;            // rows and columns of a register tile of C
constexpr int64_t kChunk = 32;           // bfloat16 of the reduction per chunk of dpbf16_product
constexpr int64_t kDepth = 512;          // the reduction's slice: B's 16 columns × 512 = 16 KiB
constexpr int64_t kPieceColumns = 1024;  // B's columns packed at a time: 2 KiB per pair-row

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// A block's buffers, kept per thread between calls (a prompt makes the same products again)
// unless they grew past kKeptBytes.
struct Operands {
  std::vector<uint16_t> rows;   // bf16(A), (m rounded up to 16) × (k rounded up to 32)
  std::vector<uint32_t> pairs;  // B's pairs, (k rounded up to 32) / 2 × (n rounded up to 16)
  std::vector<float> product;   // the product where it cannot go straight into C
};

Operands& operands() {
  thread_local Operands buffers;
  return buffers;
}

// B's pairs in panels of 16 columns: panel t holds, for each pair-row p, the pairs of columns
// 16t … 16t + 15 side by side — a slice of a panel is one contiguous run, which L1 keeps. (With
// whole rows of pairs the slice's lines lay a row of B apart, on a handful of L1's sets, and
// each pass of a row tile read them from L2 again.)
struct Panels {
  uint32_t* data;
  int64_t pair_rows;  // per panel
  uint32_t* at(int64_t p, int64_t j) const { return data + (j / kTile * pair_rows + p) * kTile; }
};

#if defined(__x86_64__)
// Pair-row p of the panels from B's rows 2p and 2p + 1 (null: zeros), n columns, 32 at a time.
__attribute__((target("avx512f,avx512bw"))) void interleave_rows(const uint16_t* even_row,
                                                                 const uint16_t* odd_row, int64_t n,
                                                                 const Panels& panels, int64_t p) {
  // Word indices into (even_row's 32 words, odd_row's 32): the first 16 pairs, then the next.
  const __m512i low = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                       39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
  for (int64_t j = 0; j < n; j += 32) {
    const __mmask32 lanes = n - j >= 32 ? ~__mmask32{0} : (__mmask32{1} << (n - j)) - 1;
    const __m512i even = _mm512_maskz_loadu_epi16(lanes, even_row + j);
    const __m512i odd =
        odd_row != nullptr ? _mm512_maskz_loadu_epi16(lanes, odd_row + j) : _mm512_setzero_si512();
    _mm512_storeu_si512(panels.at(p, j), _mm512_permutex2var_epi16(even, low, odd));
    if (n - j > 16)
      _mm512_storeu_si512(panels.at(p, j + 16), _mm512_permutex2var_epi16(even, high, odd));
  }
}
#else
void interleave_rows(const uint16_t* even_row, const uint16_t* odd_row, int64_t n,
                     const Panels& panels, int64_t p) {
  for (int64_t j = 0; j < n; ++j) {
    panels.at(p, j)[j % kTile] =
        even_row[j] | (odd_row != nullptr ? uint32_t{odd_row[j]} << 16 : 0u);
  }
  // Zeros past n to the panel's end, as the vector version's masked loads give.
  for (int64_t j = n; j % kTile != 0; ++j) panels.at(p, j)[j % kTile] = 0u;
}
#endif

// Panels of B's pairs (B(2p, j), B(2p + 1, j)) for j < n, p < panels.pair_rows: zero past k
// and n.
void pack_pairs(bool trans_b, const uint16_t* b, int64_t ldb, int64_t k, int64_t n,
                const Panels& panels) {
  const int64_t n_pad = round_up(n, kTile);
  if (!trans_b) {  // rows 2p and 2p + 1 of B, side by side: every panel's pair-rows written
    const int64_t filled = (k + 1) / 2;
    for (int64_t p = 0; p < filled; ++p) {
      const uint16_t* odd = 2 * p + 1 < k ? b + (2 * p + 1) * ldb : nullptr;
      interleave_rows(b + 2 * p * ldb, odd, n, panels, p);
    }
    for (int64_t j = 0; j < n_pad; j += kTile)
      std::fill(panels.at(filled, j), panels.at(panels.pair_rows, j), 0u);
    return;
  }
  std::fill(panels.data, panels.data + panels.pair_rows * n_pad, 0u);
  // B's column j is row j of the stored (n, k) matrix: its pairs are adjacent already.
  for (int64_t j = 0; j < n; ++j) {
    const uint16_t* row = b + j * ldb;
    for (int64_t p = 0; 2 * p + 1 < k; ++p)
      std::memcpy(panels.at(p, j) + j % kTile, row + 2 * p, 4);
    if (k % 2 == 1) panels.at(k / 2, j)[j % kTile] = row[k - 1];
  }
}

// C's columns [0, n) (one piece) = alpha·rows·op(B) + beta·C, rows already rounded (m_pad × k_pad).
void multiply_piece(Operands& ops, bool trans_b, const uint16_t* b, int64_t ldb, int64_t m,
                    int64_t n, int64_t k, float alpha, float beta, float* c, int64_t ldc) {
  const int64_t m_pad = round_up(m, kTile), n_pad = round_up(n, kTile), k_pad = round_up(k, kChunk);
  ops.pairs.resize(static_cast<size_t>(k_pad / 2 * n_pad));
  const Panels panels{ops.pairs.data(), k_pad / 2};
  pack_pairs(trans_b, b, ldb, k, n, panels);

  // Straight into C when its tiles are whole and it is only to be set or added to; else into
  // a buffer, then alpha and beta applied on the way out.
  const bool direct = m == m_pad && n == n_pad && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  float* out = c;
  int64_t ld_out = ldc;
  if (!direct) {
    ops.product.resize(static_cast<size_t>(m_pad * n_pad));
    out = ops.product.data();
    ld_out = n_pad;
  }
  const bool add_to_c = direct && beta == 1.0f;
  const uint16_t* rows = ops.rows.data();
  for (int64_t k0 = 0; k0 < k_pad; k0 += kDepth) {
    const int64_t depth = std::min(kDepth, k_pad - k0);
    for (int64_t i = 0; i < m_pad; i += kTile) {  // a row tile's slice, past every panel's
      for (int64_t j = 0; j < n_pad; j += kTile) {
        kernels::dpbf16_product(add_to_c || k0 > 0, rows + i * k_pad + k0,
                                static_cast<size_t>(k_pad), 1,
                                reinterpret_cast<const uint16_t*>(panels.at(k0 / 2, j)), kTile, 1,
                                static_cast<size_t>(depth / kChunk), nullptr, out + i * ld_out + j,
                                static_cast<size_t>(ld_out));
      }
    }
  }
  if (direct) return;
  for (int64_t r = 0; r < m; ++r) {
    const float* product = ops.product.data() + r * n_pad;
    float* row = c + r * ldc;
    for (int64_t j = 0; j < n; ++j)
      row[j] = alpha * product[j] + (beta == 0.0f ? 0.0f : beta * row[j]);
  }
}

// A buffer past this many bytes is given back after the call rather than kept for the next.
constexpr size_t kKeptBytes = size_t{8} << 20;

template <class T>
void release_if_large(std::vector<T>& buffer) {
  if (buffer.capacity() * sizeof(T) > kKeptBytes) std::vector<T>().swap(buffer);
}

}  // namespace

void gemm_dpbf16_one_thread(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                            float* c, int64_t ldc) {
  if (k == 0) {  // no products: C = beta·C
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) c[r * ldc + j] = beta == 0.0f ? 0.0f : beta * c[r * ldc + j];
    }
    return;
  }
  const int64_t m_pad = round_up(m, kTile), k_pad = round_up(k, kChunk);
  Operands& ops = operands();
  ops.rows.resize(static_cast<size_t>(m_pad * k_pad));
  uint16_t* rows = ops.rows.data();
  kernels::pack_bfloat16_rows(a, lda, static_cast<size_t>(m), static_cast<size_t>(k),
                              static_cast<size_t>(k_pad), rows);
  std::fill(rows + m * k_pad, rows + m_pad * k_pad, uint16_t{0});
  // B's columns a piece at a time, so its pairs take a bounded buffer (wte's 50257 columns of
  // logits would otherwise be repacked whole).
  for (int64_t j0 = 0; j0 < n; j0 += kPieceColumns) {
    const uint16_t* piece = trans_b ? b + j0 * ldb : b + j0;
    multiply_piece(ops, trans_b, piece, ldb, m, std::min(kPieceColumns, n - j0), k, alpha, beta,
                   c + j0, ldc);
  }
  release_if_large(ops.rows);
  release_if_large(ops.pairs);
  release_if_large(ops.product);
}

}  // namespace attn::detail
