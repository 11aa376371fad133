#include "src/kernels/bfloat16_pack.hpp"

#include <algorithm>
#include <cstdint>

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

// Blocks of N keys. Where the target has TransposeTile (AVX-512, AVX2), N × N tiles are
// transposed in registers into a small float tile, then rounded a row at a time; elsewhere a
// gather reads one value column of N rows (the rows are in L1 after the first column). The
// gathers (a load per lane) took 0.13 of the samples of the AMX forward's tiles (causal
// T = 1024, H = 16, d = 64, two Emerald Rapids threads), the tiles 0.08.
void PackBfloat16Transposed(const float* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                            uint16_t* dst) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  size_t t = 0;
  if (kHasTransposeTile && N * N <= 256) {
    HWY_ALIGN float tile[256];
    const size_t tiled_width = dv / N * N;
    for (; t + N <= rows; t += N) {
      const float* block = v + static_cast<int64_t>(t) * stride;
      for (size_t e0 = 0; e0 < tiled_width; e0 += N) {
        TransposeTile(block + e0, stride, 1.0f, tile, N);  // tile[j·N + i] = block row i, e0 + j
        for (size_t j = 0; j < N; ++j)
          hn::StoreU(Bfloat16Words(df, hn::Load(df, tile + j * N)), d16, dst + (e0 + j) * ld + t);
      }
      for (size_t e = tiled_width; e < dv; ++e) {
        for (size_t i = 0; i < N; ++i) dst[e * ld + t + i] = to_bfloat16(block[i * stride + e]);
      }
    }
  }
  const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
  // (The gather's offsets are 32-bit: rows farther apart than that take the scalar loop.)
  const bool gather = stride <= INT32_MAX / static_cast<int64_t>(N);
  for (; gather && t + N <= rows; t += N) {
    const float* block = v + static_cast<int64_t>(t) * stride;
    for (size_t e = 0; e < dv; ++e)
      hn::StoreU(Bfloat16Words(df, hn::GatherIndex(df, block + e, offsets)), d16, dst + e * ld + t);
  }
  for (; t < rows; ++t) {
    const float* row = v + static_cast<int64_t>(t) * stride;
    for (size_t e = 0; e < dv; ++e) dst[e * ld + t] = to_bfloat16(row[e]);
  }
  for (size_t e = 0; e < dv; ++e) std::fill(dst + e * ld + rows, dst + (e + 1) * ld, uint16_t{0});
}

// From words: N × N blocks widened to floats (exactly), transposed as the floats' blocks are,
// and stored as the same words again; the edges word by word.
void PackBfloat16TransposedWords(const uint16_t* v, int64_t stride, size_t rows, size_t dv,
                                 size_t ld, uint16_t* dst) {
  const DF df;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  size_t t = 0;
  if (kHasTransposeTile && N * N <= 256) {
    HWY_ALIGN float widened[256];
    HWY_ALIGN float tile[256];
    const size_t tiled_width = dv / N * N;
    for (; t + N <= rows; t += N) {
      const uint16_t* block = v + static_cast<int64_t>(t) * stride;
      for (size_t e0 = 0; e0 < tiled_width; e0 += N) {
        for (size_t i = 0; i < N; ++i)
          hn::Store(
              WidenedBfloat16(df, hn::LoadU(d16, block + static_cast<int64_t>(i) * stride + e0)),
              df, widened + i * N);
        TransposeTile(widened, static_cast<int64_t>(N), 1.0f, tile, N);
        for (size_t j = 0; j < N; ++j)
          hn::StoreU(Bfloat16Words(df, hn::Load(df, tile + j * N)), d16, dst + (e0 + j) * ld + t);
      }
      for (size_t e = tiled_width; e < dv; ++e) {
        for (size_t i = 0; i < N; ++i)
          dst[e * ld + t + i] = block[static_cast<int64_t>(i) * stride + e];
      }
    }
  }
  for (; t < rows; ++t) {
    const uint16_t* row = v + static_cast<int64_t>(t) * stride;
    for (size_t e = 0; e < dv; ++e) dst[e * ld + t] = row[e];
  }
  for (size_t e = 0; e < dv; ++e) std::fill(dst + e * ld + rows, dst + (e + 1) * ld, uint16_t{0});
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
