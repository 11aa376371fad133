#include "src/kernels/bfloat16_pack.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "attn/bfloat16.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/bfloat16_pack.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

void PackBfloat16Rows(const float* k, int64_t stride, size_t rows, size_t d, size_t ld,
                      uint16_t* dst) {
  const DF df;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  for (size_t t = 0; t < rows; ++t) {
    const float* row = k + static_cast<int64_t>(t) * stride;
    uint16_t* out = dst + t * ld;
    size_t e = 0;
    for (; e + N <= d; e += N) hn::StoreU(Bfloat16Words(df, hn::LoadU(df, row + e)), d16, out + e);
    for (; e < d; ++e) out[e] = to_bfloat16(row[e]);
    std::fill(out + d, out + ld, uint16_t{0});
  }
}

// One value as a bfloat16 word: a float rounded to nearest even, a word as it is.
HWY_INLINE uint16_t AsWord(float x) { return to_bfloat16(x); }
HWY_INLINE uint16_t AsWord(uint16_t word) { return word; }

// V's rows (floats, or bfloat16 words) into bfloat16 words transposed, in blocks of N keys.
// Where the target has TransposeTile (AVX-512, AVX2), N × N tiles are transposed in registers
// into a small float tile (words are widened to floats first, exactly), then rounded a row at a
// time; elsewhere floats are gathered, one value column of N rows at a time (the rows are in L1
// after the first column), and words are copied one by one. The gathers (a load per lane) took
// 0.13 of the samples of the AMX forward's tiles (causal T = 1024, H = 16, d = 64, two Emerald
// Rapids threads), the tiles 0.08.
template <class T>
void PackTransposed(const T* v, int64_t stride, size_t rows, size_t dv, size_t ld, uint16_t* dst) {
  constexpr bool kWords = std::is_same_v<T, uint16_t>;
  const DF df;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  size_t t = 0;
  if (kHasTransposeTile && N * N <= 256) {
    HWY_ALIGN float tile[256];
    const size_t tiled_width = dv / N * N;
    for (; t + N <= rows; t += N) {
      const T* block = v + static_cast<int64_t>(t) * stride;
      for (size_t e0 = 0; e0 < tiled_width; e0 += N) {
        if constexpr (kWords) {
          HWY_ALIGN float widened[256];  // the block's N rows of this tile, as floats
          for (size_t i = 0; i < N; ++i) {
            const auto words = hn::LoadU(d16, block + static_cast<int64_t>(i) * stride + e0);
            hn::Store(WidenedBfloat16(df, words), df, widened + i * N);
          }
          TransposeTile(widened, static_cast<int64_t>(N), 1.0f, tile, N);
        } else {
          TransposeTile(block + e0, stride, 1.0f, tile, N);  // tile[j·N + i] = row i, e0 + j
        }
        for (size_t j = 0; j < N; ++j)
          hn::StoreU(Bfloat16Words(df, hn::Load(df, tile + j * N)), d16, dst + (e0 + j) * ld + t);
      }
      for (size_t e = tiled_width; e < dv; ++e) {
        for (size_t i = 0; i < N; ++i)
          dst[e * ld + t + i] = AsWord(block[static_cast<int64_t>(i) * stride + e]);
      }
    }
  }
  if constexpr (!kWords) {
    const hn::RebindToSigned<DF> di;
    const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
    // (The gather's offsets are 32-bit: rows farther apart than that take the scalar loop.)
    const bool gather = stride <= INT32_MAX / static_cast<int64_t>(N);
    for (; gather && t + N <= rows; t += N) {
      const float* block = v + static_cast<int64_t>(t) * stride;
      for (size_t e = 0; e < dv; ++e) {
        const auto column = hn::GatherIndex(df, block + e, offsets);
        hn::StoreU(Bfloat16Words(df, column), d16, dst + e * ld + t);
      }
    }
  }
  for (; t < rows; ++t) {
    const T* row = v + static_cast<int64_t>(t) * stride;
    for (size_t e = 0; e < dv; ++e) dst[e * ld + t] = AsWord(row[e]);
  }
  for (size_t e = 0; e < dv; ++e) std::fill(dst + e * ld + rows, dst + (e + 1) * ld, uint16_t{0});
}

void PackBfloat16Transposed(const float* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                            uint16_t* dst) {
  PackTransposed(v, stride, rows, dv, ld, dst);
}

void PackBfloat16TransposedWords(const uint16_t* v, int64_t stride, size_t rows, size_t dv,
                                 size_t ld, uint16_t* dst) {
  PackTransposed(v, stride, rows, dv, ld, dst);
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(PackBfloat16Rows);
HWY_EXPORT(PackBfloat16Transposed);

void pack_bfloat16_rows(const float* k, int64_t stride, size_t rows, size_t d, size_t ld,
                        uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(PackBfloat16Rows)(k, stride, rows, d, ld, dst);
}

void pack_bfloat16_transposed(const float* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                              uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(PackBfloat16Transposed)(v, stride, rows, dv, ld, dst);
}

HWY_EXPORT(PackBfloat16TransposedWords);

void pack_bfloat16_rows(const uint16_t* k, int64_t stride, size_t rows, size_t d, size_t ld,
                        uint16_t* dst) {
  for (size_t t = 0; t < rows; ++t) {
    const uint16_t* row = k + static_cast<int64_t>(t) * stride;
    std::copy(row, row + d, dst + t * ld);
    std::fill(dst + t * ld + d, dst + (t + 1) * ld, uint16_t{0});
  }
}

void pack_bfloat16_transposed(const uint16_t* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                              uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(PackBfloat16TransposedWords)(v, stride, rows, dv, ld, dst);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
