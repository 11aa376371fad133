// What the SIMD kernels share, compiled once per Highway target: include it after
// hwy/foreach_target.h, as the kernels do. The guard below is Highway's per-target pattern:
// the header is re-read for each target that foreach_target.h compiles.
#if defined(ATTN_KERNELS_SIMD_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_SIMD_COMMON_INL_H_
#undef ATTN_KERNELS_SIMD_COMMON_INL_H_
#else
#define ATTN_KERNELS_SIMD_COMMON_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "attn/bfloat16.hpp"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

// The x86 targets with 512-bit vectors (16 floats), whatever this pass of foreach_target.h
// compiles: x86 intrinsics of that width, and AMX tiles whose rows are as wide.
#define ATTN_AVX512_TARGET (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3)

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// v rounded to the nearest bfloat16 (ties to even), as a float: the low 16 bits cleared after
// adding 0x7FFF and the kept part's lowest bit. For finite values (the probabilities and score
// gradients the bf16 products round); attn::to_bfloat16 is the scalar rule it matches.
HWY_INLINE VF RoundedToBfloat16(DF df, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto up = hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFu), odd));
  return hn::BitCast(df, hn::And(up, hn::Set(du, 0xFFFF0000u)));
}
// The same for one float (a loop's tail).
inline float RoundedToBfloat16(float x) { return from_bfloat16(to_bfloat16(x)); }

// v as the bfloat16 words it rounds to (RoundedToBfloat16's top halves), what the packers store.
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> Bfloat16Words(DF df, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;  // (Highway demotes signed 32-bit lanes to u16)
  const auto top = hn::ShiftRight<16>(hn::BitCast(du, RoundedToBfloat16(df, v)));
  return hn::DemoteTo(hn::Rebind<uint16_t, DF>(), hn::BitCast(di, top));
}

// bfloat16 words as the floats they hold, exactly (a word is a float's top half): Bfloat16Words
// gives the same words back.
HWY_INLINE VF WidenedBfloat16(DF df, hn::Vec<hn::Rebind<uint16_t, DF>> words) {
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, words)));
}

// `rows` rows of `width` floats (src, stride apart) into dst rows ld apart, zero-padded: rows
// the register tiles can read as whole vectors.
inline void PackRows(const float* src, int64_t stride, size_t rows, size_t width, float* dst,
                     size_t ld) {
  for (size_t r = 0; r < rows; ++r) {
    const float* row = src + static_cast<int64_t>(r) * stride;
    std::copy(row, row + width, dst + r * ld);
    std::fill(dst + r * ld + width, dst + (r + 1) * ld, 0.0f);
  }
}

// The same from `rows` rows of `width` bfloat16 words: each widened, exactly, to its float.
inline void WidenRows(const uint16_t* src, int64_t stride, size_t rows, size_t width, float* dst,
                      size_t ld) {
  const DF df;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* row = src + static_cast<int64_t>(r) * stride;
    size_t e = 0;
    for (; e + N <= width; e += N)
      hn::StoreU(WidenedBfloat16(df, hn::LoadU(d16, row + e)), df, dst + r * ld + e);
    for (; e < width; ++e) dst[r * ld + e] = from_bfloat16(row[e]);
    std::fill(dst + r * ld + width, dst + (r + 1) * ld, 0.0f);
  }
}

// Transposes a square tile of N × N floats in registers: rows r[0..N) in, columns out, each
// multiplied by `factor` and stored at dst + c·ld. The x86 shuffles of the classic
// four-stage (AVX-512) and three-stage (AVX2) transposes; other targets have no tile version.
// kStream: non-temporal stores (dst and ld aligned to a vector; the caller fences), for output
// that nothing reads soon: they skip reading each line before writing it and leave the cache
// to the operands.
#if ATTN_AVX512_TARGET
constexpr bool kHasTransposeTile = true;
template <bool kStream = false>
inline void TransposeTile(const float* src, int64_t stride, float factor, float* dst, size_t ld) {
  auto store = [](float* at, __m512 value) {
    if constexpr (kStream) {
      _mm512_stream_ps(at, value);
    } else {
      _mm512_storeu_ps(at, value);
    }
  };
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * stride);
  for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved: (a0 b0 a1 b1) per 128-bit lane
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // r[4i + j], lane L: column 4L + j of rows 4i .. 4i + 3
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  const __m512 f = _mm512_set1_ps(factor);
  for (int j = 0; j < 4; ++j) {  // gather lane L of r[j], r[4 + j], r[8 + j], r[12 + j]
    const __m512 even_a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 odd_a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    const __m512 even_b = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 odd_b = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    store(dst + (0 + j) * ld, _mm512_mul_ps(f, _mm512_shuffle_f32x4(even_a, even_b, 0x88)));
    store(dst + (8 + j) * ld, _mm512_mul_ps(f, _mm512_shuffle_f32x4(even_a, even_b, 0xdd)));
    store(dst + (4 + j) * ld, _mm512_mul_ps(f, _mm512_shuffle_f32x4(odd_a, odd_b, 0x88)));
    store(dst + (12 + j) * ld, _mm512_mul_ps(f, _mm512_shuffle_f32x4(odd_a, odd_b, 0xdd)));
  }
}
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
constexpr bool kHasTransposeTile = true;
template <bool kStream = false>
inline void TransposeTile(const float* src, int64_t stride, float factor, float* dst, size_t ld) {
  auto store = [](float* at, __m256 value) {
    if constexpr (kStream) {
      _mm256_stream_ps(at, value);
    } else {
      _mm256_storeu_ps(at, value);
    }
  };
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * stride);
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // r[4i + j], lane L: column 4L + j of rows 4i .. 4i + 3
    r[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  const __m256 f = _mm256_set1_ps(factor);
  for (int j = 0; j < 4; ++j) {
    store(dst + j * ld, _mm256_mul_ps(f, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20)));
    store(dst + (4 + j) * ld, _mm256_mul_ps(f, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31)));
  }
}
#else
constexpr bool kHasTransposeTile = false;
template <bool kStream = false>
inline void TransposeTile(const float*, int64_t, float, float*, size_t) {}
#endif

// dst[e·ld + r] = factor·src[r·stride + e] for r < rows, e < width, and nothing else written:
// `rows` rows of `width` floats transposed. Whole N × N tiles go through TransposeTile; the edges
// element by element, reading down a column so the strided side is the reads (they stay in L1).
inline void Transpose(const float* src, int64_t stride, size_t rows, size_t width, float factor,
                      float* dst, size_t ld) {
  const size_t N = hn::Lanes(DF());
  const bool tiles = kHasTransposeTile && N * N <= 256;
  const size_t tiled_rows = tiles ? rows / N * N : 0, tiled_width = tiles ? width / N * N : 0;
  for (size_t e0 = 0; e0 < tiled_width; e0 += N) {
    for (size_t r0 = 0; r0 < tiled_rows; r0 += N) {
      TransposeTile(src + static_cast<int64_t>(r0) * stride + static_cast<int64_t>(e0), stride,
                    factor, dst + e0 * ld + r0, ld);
    }
  }
  for (size_t e = 0; e < width; ++e) {
    float* out = dst + e * ld;
    // Columns inside the tiles still need their last rows; columns past them, every row.
    for (size_t r = e < tiled_width ? tiled_rows : 0; r < rows; ++r) {
      out[r] = factor * src[static_cast<int64_t>(r) * stride + static_cast<int64_t>(e)];
    }
  }
}

// The same with rows ≤ r < ld of each column set to 0: a query block's Qᵀ or dOᵀ, padded to
// the tiles' width. (Element by element, this was a fifth of each attention kernel at T = 64,
// d = 32, the GPT's.)
inline void PackTransposed(const float* src, int64_t stride, size_t rows, size_t width,
                           float factor, float* dst, size_t ld) {
  Transpose(src, stride, rows, width, factor, dst, ld);
  for (size_t e = 0; e < width; ++e) std::fill(dst + e * ld + rows, dst + (e + 1) * ld, 0.0f);
}

// The polynomial with the given coefficients (highest power first) at r, by Horner's rule.
template <size_t kTerms>
HWY_INLINE VF Horner(DF df, VF r, const float (&highest_first)[kTerms]) {
  VF p = hn::Set(df, highest_first[0]);
#pragma GCC unroll 8
  for (size_t i = 1; i < kTerms; ++i) p = hn::MulAdd(p, r, hn::Set(df, highest_first[i]));
  return p;
}

// 2^n·p, n being an integer held in the low bits of `biased` = n + 1.5·2^23 (a float whose
// unit is 1, so its exponent is fixed): shifted by 23, those bits add n to p's exponent field,
// the bits above falling off the top. 0 where `keep` is false.
HWY_INLINE VF TimesPowerOfTwo(DF df, VF p, VF biased, hn::Mask<DF> keep) {
  const hn::RebindToSigned<DF> di;
  const auto scaled = hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, biased)));
  return hn::IfThenElseZero(keep, hn::BitCast(df, scaled));
}

constexpr float kLog2e = 1.44269504088896341f;  // 1 / ln 2
constexpr float kLn2 = 0.693147180559945309f;

// exp(x) for x ≤ 0, flushed to 0 below x = −64 (e^−64 ≈ 1.6e−28). A probability that small is
// worth nothing next to the row's largest, 1, but when it, or its product with a value, is
// subnormal (< 2^−126), every FMA that touches it costs a microcode assist: with
// Wq = Wk = Wv, where each query peaks sharply on its own key, they made the multi-head block
// 2.6× slower (110 ms instead of 42 at T = 1024). −64 keeps p·v normal for |v| ≥ 1e−10.
//
// Not Highway's hn::Exp, which serves every float (~25 vector operations): here x = n·ln2 + r
// with |r| ≤ ln2/2 (ln2 in two parts, so n·ln2's rounding does not reach r), e^r from Cephes'
// expf polynomial (degree 7, relative error below 2e−7, tested against std::exp) by Horner's
// rule, and 2^n added to the exponent bits: 16 operations. n is rounded by adding 1.5·2^23 in
// the same FMA that scales x by 1/ln2, which leaves n in the low bits of the sum; a round and a
// float-to-int conversion (five more operations with AVX2's overflow fix-up) are not needed.
// Inputs below −64 (−inf for masked scores, NaN) give garbage bits that the final select
// zeroes, so only the top is clamped (x > 88 would overflow 2^n). The decoder's softmax uses
// it; the fused forward's and backward's use Exp2Flushed below.
HWY_INLINE VF ExpFlushed(DF df, VF x) {
  const VF round_bias = hn::Set(df, 12582912.0f);  // 1.5·2^23: the sum's unit is 1
  const VF clamped = hn::Min(x, hn::Set(df, 88.0f));
  const VF biased = hn::MulAdd(clamped, hn::Set(df, kLog2e), round_bias);
  const VF n = hn::Sub(biased, round_bias);                   // round(x / ln2)
  VF r = hn::MulAdd(n, hn::Set(df, -0.693359375f), clamped);  // ln2 = 0.693359375 − 2.12e−4…
  r = hn::MulAdd(n, hn::Set(df, 2.12194440e-4f), r);
  constexpr float kCephesExp[] = {1.9875691500e-4f,
                                  1.3981999507e-3f,
                                  8.3334519073e-3f,
                                  4.1665795894e-2f,
                                  1.6666665459e-1f,
                                  5.0000001201e-1f,
                                  1.0f,
                                  1.0f};
  const VF p = Horner(df, r, kCephesExp);  // e^r
  return TimesPowerOfTwo(df, p, biased, hn::Ge(x, hn::Set(df, -64.0f)));
}

// 2^x for x ≤ 127, flushed to 0 below x = −92 (2^−92 ≈ 2e−28: ExpFlushed's −64, in base 2).
// The fused kernels compute their scores already multiplied by log2(e) (folded into the
// scaling of Q), so exp(s − m) = 2^(s·log2 e − m·log2 e), and base 2 needs less work: n is
// x rounded (1.5·2^23 added and taken off), r = x − n is exact (|r| ≤ ½, so no two-part
// constant), and 2^r is a degree-6 polynomial by Horner's rule: 14 operations, 6 of them FMAs
// against ExpFlushed's 11 — the units the score products also need. The polynomial is the
// minimax one (relative error) for 2^r on [−½, ½] with p(0) = 1, fitted for this kernel by
// scripts/exp2_polynomial.py: 2e−9 in exact arithmetic, below 1e−7 evaluated in float. On one
// Zen 3 core it took the causal forward's softmax (T = 1024, H = 16, d = 64) from 9.3 to
// 7.6 Mcycles of 70.
//
// AVX-512 has both integer tricks as single instructions: vreduceps gives x − round(x), and
// vscalefps multiplies by 2^n (with the flush as its zero-masking): 10 operations instead of 14,
// the same rounding of x and the same polynomial, so the same bits (tests/exp_flushed_test.cpp
// compares them with the AVX2 target's).
template <bool kClamp, size_t kTerms>
HWY_INLINE VF Exp2FlushedBy(DF df, VF x, const float (&polynomial)[kTerms]) {
#if ATTN_AVX512_TARGET
  const __m512 clamped = kClamp ? _mm512_min_ps(x.raw, _mm512_set1_ps(127.0f)) : x.raw;
  // Rounding to nearest even, as the 1.5·2^23 below; 0 fraction bits kept, no exception flag.
  const __m512 r = _mm512_reduce_ps(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const VF p = Horner(df, VF{r}, polynomial);  // 2^r
  const __mmask16 keep = _mm512_cmp_ps_mask(x.raw, _mm512_set1_ps(-92.0f), _CMP_GE_OQ);
  return VF{_mm512_maskz_scalef_ps(keep, p.raw, _mm512_sub_ps(clamped, r))};  // p·2^round(x)
#else
  const VF round_bias = hn::Set(df, 12582912.0f);  // 1.5·2^23: the sum's unit is 1
  const VF clamped = kClamp ? hn::Min(x, hn::Set(df, 127.0f)) : x;
  const VF biased = hn::Add(clamped, round_bias);
  const VF r = hn::Sub(clamped, hn::Sub(biased, round_bias));  // x − round(x), exactly
  const VF p = Horner(df, r, polynomial);                      // 2^r
  return TimesPowerOfTwo(df, p, biased, hn::Ge(x, hn::Set(df, -92.0f)));
#endif
}

HWY_INLINE VF Exp2Flushed(DF df, VF x) {
  constexpr float kMinimaxExp2[] = {1.535336196e-4f,
                                    1.339887502e-3f,
                                    9.618436918e-3f,
                                    5.550332367e-2f,
                                    2.402264774e-1f,
                                    6.931471825e-1f,
                                    1.0f};
  return Exp2FlushedBy</*kClamp=*/true>(df, x, kMinimaxExp2);
}

// Exp2Flushed for probabilities that are rounded to bfloat16 next (the packed-tile forward's P,
// whose rounding is 2^−9 = 2e−3): the minimax polynomial of degree 4 (scripts/exp2_polynomial.py
// 4), 2.9e−6 evaluated in float, two FMAs fewer. l sums these unrounded probabilities, so the
// normalisation moves by 2.9e−6 at most, against the bound of the bf16 products' 2u. For
// x ≤ 127 only, with no clamp above (a softmax's x = score − max is ≤ 0): one operation less.
HWY_INLINE VF Exp2ForBfloat16(DF df, VF x) {
  constexpr float kMinimaxExp2Degree4[] = {9.582852945e-3f, 5.590642616e-2f, 2.402409911e-1f,
                                           6.931241751e-1f, 1.0f};
  return Exp2FlushedBy</*kClamp=*/false>(df, x, kMinimaxExp2Degree4);
}

// 1/a for a normal float a whose reciprocal is normal too: the CPU's estimate r and Newton
// steps r + r·(1 − a·r), each of which squares the relative error (the residual 1 − a·r is
// exact in one FMA, so the last step reaches float's rounding: 1/1 is 1, which the form
// r·(2 − a·r) misses by an ulp). AVX-512's vrcp14ps is within 2^−14: one step; AVX2's and
// SSE4's vrcpps within 2^−12: two. (EMU128 and scalar divide.) A division of 16 floats takes
// one AVX-512 divider 10–16 cycles; these operations pipeline with the rest.
HWY_INLINE VF Reciprocal(DF df, VF a) {
  const VF one = hn::Set(df, 1.0f);
  VF r = hn::ApproximateReciprocal(a);
  r = hn::MulAdd(r, hn::NegMulAdd(a, r, one), r);
#if !ATTN_AVX512_TARGET
  r = hn::MulAdd(r, hn::NegMulAdd(a, r, one), r);
#endif
  return r;
}

// tanh(u) = u·P(u²) / Q(u²) on |u| ≤ 9 (past it tanh is ±1 to float's precision), a rational
// fit made for this kernel by scripts/tanh_rational.py: relative error 2e-8 in exact arithmetic,
// 4e-7 evaluated in float, and no cancellation near 0 (where (1 − e^{−2u})/(1 + e^{−2u})
// loses every digit). The division is Reciprocal's (a second Newton step on AVX2). 16 operations;
// Highway's general Tanh made the soft-capped forward 42 % slower than the plain one (causal
// T = 4096, H = 16, d = 64, two Zen 2 threads), this one 16-17 % (docs/performance.md). The
// soft-capping of the fused kernels (score_variants-inl.h) and of the decoder use it.
HWY_INLINE VF TanhRational(DF df, VF u) {
  const VF limit = hn::Set(df, 9.0f);
  const VF x = hn::Min(hn::Max(u, hn::Neg(limit)), limit);
  const VF z = hn::Mul(x, x);
  constexpr float kP[] = {1.3358296524e-08f, 2.0610801771e-05f, 3.4956433163e-03f,
                          1.3381053196e-01f, 9.9999997703e-01f};
  constexpr float kQ[] = {7.7777963372e-07f, 3.2857617095e-04f, 2.5877134221e-02f,
                          4.6714368157e-01f, 1.0f};
  const VF numerator = hn::Mul(x, Horner(df, z, kP));
  return hn::Mul(numerator, Reciprocal(df, Horner(df, z, kQ)));
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
