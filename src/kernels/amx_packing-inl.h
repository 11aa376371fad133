// Packing for the AMX kernels' tile operands (amx_tiles.hpp) inside a task, shared by the
// forward (flash_forward_amx.cpp) and the backward (flash_backward.cpp): Q and dO rounded to
// the nearest bfloat16 here (both passes read the caller's floats, or the forward its bfloat16
// words as they are), and so are the backward's P and dS (the forward's P is paired by its
// softmax). Compiled once per Highway target
// (include it after tile_product-inl.h); only the AVX-512 targets define it (16 float lanes,
// the tiles' width).
#if defined(ATTN_KERNELS_AMX_PACKING_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_AMX_PACKING_INL_H_
#undef ATTN_KERNELS_AMX_PACKING_INL_H_
#else
#define ATTN_KERNELS_AMX_PACKING_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hwy/highway.h"
#include "src/kernels/bfloat16.hpp"
#include "src/kernels/block_visibility.hpp"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

#if ATTN_AVX512_TARGET  // the tiles' rows are 16 floats, as these targets' vectors

constexpr size_t kTile = 16;   // queries per AMX column tile
constexpr size_t kChunk = 32;  // reduction length per tile product

// Rounding to bfloat16 by AVX-512 BF16's own instructions, which the packed tiles' CPUs have
// (amx_bf16_usable() requires it): one instruction where the integer rounding of
// RoundedToBfloat16 and the narrowing or pairing took 6–13. To nearest even, as that rounding,
// except that a subnormal float becomes 0: never a probability (Exp2Flushed), and for dS a change
// under 2^-126, far inside the products' bound. Written as asm: Highway 1.0 has no target with
// AVX-512 BF16 to compile the intrinsics in.
//
// The bfloat16 words of v, lane for lane (vcvtneps2bf16).
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> RoundedWords(VF v) {
  __m256i words;
  asm("vcvtneps2bf16 %1, %0" : "=v"(words) : "v"(v.raw));
  return hn::Vec<hn::Rebind<uint16_t, DF>>{words};
}

// The pair words of two vectors: word i holds bf16(even[i]) in its low half and bf16(odd[i]) in
// its high half (vcvtne2ps2bf16 rounds both vectors, a word shuffle interleaves them).
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundedPairWords(VF even, VF odd) {
  __m512i halves;  // bf16(even) in words 0..15, bf16(odd) in 16..31
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(halves) : "v"(odd.raw), "v"(even.raw));
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return hn::Vec<hn::RebindToUnsigned<DF>>{_mm512_permutexvar_epi16(interleave, halves)};
}

// The word of a tile's pair: the bfloat16 of `even` in the low half, of `odd` in the upper one
// (floats holding bfloat16 values exactly): a vector of words, or one.
template <class DU, class VU>
HWY_INLINE VU PairWords(DU du, VU even, VU odd) {
  return hn::Or(hn::And(odd, hn::Set(du, 0xFFFF0000u)), hn::ShiftRight<16>(even));
}
inline uint32_t PairWord(float even, float odd) {
  return uint32_t{exact_bfloat16_bits(odd)} << 16 | exact_bfloat16_bits(even);
}

// Sixteen vectors of 16 floats transposed in place: x[j] lane i ← x[i] lane j. Four rounds of
// 16 shuffles (pairs of elements, then of pairs, then 128-bit lanes twice).
HWY_INLINE void Transpose16x16(__m512 (&x)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]);
  }
  // x[4i + k], 128-bit lane L: rows 4i … 4i + 3 of column 4L + k.
  for (int i = 0; i < 4; ++i) {
    x[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    x[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    x[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    x[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_f32x4(x[k], x[4 + k], 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(x[k], x[4 + k], 0xDD);
    t[8 + k] = _mm512_shuffle_f32x4(x[8 + k], x[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(x[8 + k], x[12 + k], 0xDD);
  }
  for (int k = 0; k < 4; ++k) {
    x[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    x[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xDD);
    x[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
    x[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xDD);
  }
}

// B of Sᵀ = K·Qᵀ: word k of query r holds (Q[r][2k], Q[r][2k + 1]) — the row's values rounded to
// bfloat16, in pairs, as words — at qp[k·ldq + r]: a transpose of the rows' words, 16 rows × 16
// words at a time in registers (Transpose16x16; one scatter per row and 32 values, as before,
// was 2 % of the causal forward at T = 1024). Zero past the rows and past d, for the d_pad / 2
// pair-rows. From bfloat16 words (Element uint16_t) a pair is two adjacent words as they lie:
// one 32-bit load, nothing to round.
template <class Element>
void PackQueryPairs(const Element* q, int64_t stride, size_t rows, size_t d, size_t d_pad,
                    size_t ldq, uint32_t* qp) {
  constexpr bool kWords = std::is_same_v<Element, uint16_t>;
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const size_t N = hn::Lanes(df);
  const size_t vector_part = d / (2 * N) * (2 * N);
  for (size_t r0 = 0; r0 < ldq; r0 += kTile) {
    for (size_t e = 0; e < vector_part; e += 2 * N) {
      __m512 words[16];  // row r0 + i's 16 words of values e … e + 31
      for (size_t i = 0; i < kTile; ++i) {
        if (r0 + i >= rows) {
          words[i] = _mm512_setzero_ps();
          continue;
        }
        const Element* row = q + static_cast<int64_t>(r0 + i) * stride;
        if constexpr (kWords) {
          words[i] = _mm512_loadu_ps(row + e);
        } else {
          const auto lo = hn::BitCast(du, RoundedToBfloat16(df, hn::LoadU(df, row + e)));
          const auto hi = hn::BitCast(du, RoundedToBfloat16(df, hn::LoadU(df, row + e + N)));
          words[i] = _mm512_castsi512_ps(
              PairWords(du, hn::ConcatEven(du, hi, lo), hn::ConcatOdd(du, hi, lo)).raw);
        }
      }
      Transpose16x16(words);  // words[k]: word e / 2 + k of the 16 rows
      for (size_t k = 0; k < kTile; ++k)
        _mm512_storeu_ps(reinterpret_cast<float*>(qp + (e / 2 + k) * ldq + r0), words[k]);
    }
  }
  for (size_t r = 0; r < ldq; ++r) {
    const Element* row = q + static_cast<int64_t>(r) * stride;
    for (size_t e = vector_part; e < d_pad; e += 2) {
      const bool even = r < rows && e < d, odd = r < rows && e + 1 < d;
      if constexpr (kWords) {
        qp[(e / 2) * ldq + r] =
            uint32_t{odd ? row[e + 1] : uint16_t{0}} << 16 | (even ? row[e] : uint16_t{0});
      } else {
        qp[(e / 2) * ldq + r] = PairWord(RoundedToBfloat16(even ? row[e] : 0.0f),
                                         RoundedToBfloat16(odd ? row[e + 1] : 0.0f));
      }
    }
  }
}

// Sᵀ *= factor (scale·log2 e; the backward's dPᵀ: scale) where the softmax will read it.
inline void ScaleScores(const DiagonalCut& cut, float scale2, float* st, size_t ldq) {
  const DF df;
  const VF factor = hn::Set(df, scale2);
  ForEachNeededVector(cut, ldq, [&](size_t at) {
    hn::StoreU(hn::Mul(factor, hn::LoadU(df, st + at)), df, st + at);
  });
}

// B of the backward's dQᵀ += Kᵀ·dSᵀ (the forward's Oᵀ += Vᵀ·Pᵀ gets its pairs straight from
// the softmax: SoftmaxUpdateToPairs): the values of keys 2k and 2k + 1 side by side for each
// query, one 32-bit word per (pair-row k, query), from a transposed block (dS in float), each
// rounded to bfloat16 here (RoundedPairWords).
// chunks[t] = the chunks of 32 keys query tile t needs. A block of two tiles reads as many as
// the later one needs (amx_product), so every tile's pairs are written that far: zero past the
// keys the softmax computed for it.
inline void PackKeyPairs(const DiagonalCut& cut, size_t cols, const float* st, size_t ldq,
                         uint32_t* pp, size_t* chunks) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const size_t N = hn::Lanes(df);
  // Later query vectors see more keys (KeysForQueryVector grows with r).
  const size_t all_pairs = round_up(std::min(KeysForQueryVector(cut, ldq - N), cols), kChunk) / 2;
  for (size_t r = 0; r < ldq; r += N) {
    const size_t seen = std::min(KeysForQueryVector(cut, r), cols);
    chunks[r / kTile] = round_up(seen, kChunk) / kChunk;
    for (size_t k = 0; k < all_pairs; ++k) {
      const size_t c = 2 * k;
      const VF even = c < seen ? hn::LoadU(df, st + c * ldq + r) : hn::Zero(df);
      const VF odd = c + 1 < seen ? hn::LoadU(df, st + (c + 1) * ldq + r) : hn::Zero(df);
      hn::StoreU(RoundedPairWords(even, odd), du, pp + k * ldq + r);
    }
  }
}

// B of the backward's dV_j += Pᵀ·dO_i and dK_j += dSᵀ·Q_i, whose reduction runs over queries:
// word (k, e) = (X[2k][e], X[2k + 1][e]) at out[k·ld + e], for the pair-rows k < pair_rows (zero
// past the rows) and e < ld (zero past the width); X's values rounded to bfloat16 (the AMX
// backward reads the caller's Q and dO).
inline void PackRowPairs(const float* x, int64_t stride, size_t rows, size_t width, size_t ld,
                         size_t pair_rows, uint32_t* out) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const size_t N = hn::Lanes(df);
  std::fill(out, out + pair_rows * ld, 0u);
  for (size_t k = 0; k < pair_rows && 2 * k < rows; ++k) {
    const float* even_row = x + static_cast<int64_t>(2 * k) * stride;
    const float* odd_row = 2 * k + 1 < rows ? even_row + stride : nullptr;
    size_t e = 0;
    for (; e + N <= width; e += N) {
      const auto even = hn::BitCast(du, RoundedToBfloat16(df, hn::LoadU(df, even_row + e)));
      const auto odd = odd_row ? hn::BitCast(du, RoundedToBfloat16(df, hn::LoadU(df, odd_row + e)))
                               : hn::Zero(du);
      hn::StoreU(PairWords(du, even, odd), du, out + k * ld + e);
    }
    for (; e < width; ++e) {
      out[k * ld + e] =
          PairWord(RoundedToBfloat16(even_row[e]), odd_row ? RoundedToBfloat16(odd_row[e]) : 0.0f);
    }
  }
}

// A of the same products: a transposed block (keys × ldq, P or dS in float) as bfloat16 rows of
// ld ≥ ldq queries, each value rounded here (RoundedWords), for the keys [0, round_up(cols, 16))
// the tiles cover; zero past the keys the softmax computed for each query vector and past ldq.
inline void PackTransposedRows(const DiagonalCut& cut, size_t cols, const float* st, size_t ldq,
                               size_t ld, uint16_t* out) {
  const DF df;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  const size_t key_rows = round_up(cols, kTile);
  for (size_t r = 0; r < ldq; r += N) {
    const size_t seen = std::min(KeysForQueryVector(cut, r), cols);
    for (size_t c = 0; c < key_rows; ++c) {
      const auto words = c < seen ? RoundedWords(hn::LoadU(df, st + c * ldq + r)) : hn::Zero(d16);
      hn::StoreU(words, d16, out + c * ld + r);
    }
  }
  for (size_t c = 0; c < key_rows; ++c)
    std::fill(out + c * ld + ldq, out + (c + 1) * ld, uint16_t{0});
}

#endif  // AVX-512 targets

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
