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
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;  // (Highway demotes signed 32-bit lanes to u16)
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const size_t N = hn::Lanes(df);
  for (size_t t = 0; t < rows; ++t) {
    const float* row = k + static_cast<int64_t>(t) * stride;
    uint16_t* out = dst + t * ld;
    size_t e = 0;
    for (; e + N <= d; e += N) {
      const auto rounded = RoundedToBfloat16(df, hn::LoadU(df, row + e));
      const auto top = hn::ShiftRight<16>(hn::BitCast(du, rounded));
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, top)), d16, out + e);
    }
    for (; e < d; ++e) out[e] = to_bfloat16(row[e]);
    std::fill(out + d, out + ld, uint16_t{0});
  }
}

// Blocks of N keys: a gather reads one value column of N rows (the rows are in L1 after the
// first column), and each output row gets N values in one store.
void PackBfloat16Transposed(const float* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                            uint16_t* dst) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const size_t N = hn::Lanes(df);
  const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(stride)));
  size_t t = 0;
  // (The gather's offsets are 32-bit: rows farther apart than that take the scalar loop.)
  const bool gather = stride <= INT32_MAX / static_cast<int64_t>(N);
  for (; gather && t + N <= rows; t += N) {
    const float* block = v + static_cast<int64_t>(t) * stride;
    for (size_t e = 0; e < dv; ++e) {
      const auto column = RoundedToBfloat16(df, hn::GatherIndex(df, block + e, offsets));
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, column)))),
                 d16, dst + e * ld + t);
    }
  }
  for (; t < rows; ++t) {
    const float* row = v + static_cast<int64_t>(t) * stride;
    for (size_t e = 0; e < dv; ++e) dst[e * ld + t] = to_bfloat16(row[e]);
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

}  // namespace attn::kernels
#endif  // HWY_ONCE
