// See bfloat16.hpp.
#include "src/kernels/bfloat16.hpp"

#include "attn/bfloat16.hpp"
#include "attn/simd.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/bfloat16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RoundToBfloat16(const float* HWY_RESTRICT src, int64_t rows, int64_t cols, int64_t ld,
                     uint16_t* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto quiet = hn::Set(du, 0x40u);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * ld;
    uint16_t* out = dst + r * cols;
    int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) {
      const auto v = hn::LoadU(df, in + c);
      // To nearest, ties to even (RoundedToBfloat16); a NaN keeps its top bits, made quiet.
      const auto rounded = hn::ShiftRight<16>(hn::BitCast(du, RoundedToBfloat16(df, v)));
      const auto nan = hn::Or(hn::ShiftRight<16>(hn::BitCast(du, v)), quiet);
      const auto top = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, top)), d16, out + c);
    }
    for (; c < cols; ++c) out[c] = to_bfloat16(in[c]);
  }
}

void RoundFloatsToBfloat16(const float* src, int64_t n, float* dst) {
  const DF df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(RoundedToBfloat16(df, hn::LoadU(df, src + i)), df, dst + i);
  for (; i < n; ++i) dst[i] = from_bfloat16(to_bfloat16(src[i]));
}

void RoundFloatRowsToBfloat16(const float* src, int64_t stride, int64_t rows, int64_t width,
                              float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    RoundFloatsToBfloat16(src + r * stride, width, dst + r * width);
}

void WidenBfloat16Rows(const uint16_t* src, int64_t stride, int64_t rows, int64_t width,
                       float* dst) {
  WidenRows(src, stride, static_cast<size_t>(rows), static_cast<size_t>(width), dst,
            static_cast<size_t>(width));
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <immintrin.h>

namespace attn::kernels {

HWY_EXPORT(RoundToBfloat16);
HWY_EXPORT(RoundFloatsToBfloat16);
HWY_EXPORT(RoundFloatRowsToBfloat16);
HWY_EXPORT(WidenBfloat16Rows);

namespace {

#if defined(__x86_64__)
// AVX-512 BF16 rounds 16 floats in one instruction (vcvtneps2bf16: to nearest even, NaN kept
// quiet); the integer sequence above takes a dozen, and rounding the operands cost 11 % of a
// training step in bf16. Highway 1.0 has no target for it, so this is compiled for it alone
// and chosen at run time. It differs from to_bfloat16 only for subnormal inputs (read as 0).
__attribute__((target("avx512f,avx512bf16,avx512vl"))) void RoundWithAvx512Bf16(
    const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * ld;
    uint16_t* out = dst + r * cols;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16) {
      const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + c));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c),
                          reinterpret_cast<const __m256i&>(rounded));
    }
    for (; c < cols; ++c) out[c] = to_bfloat16(in[c]);
  }
}
#endif

}  // namespace

void round_to_bfloat16_portable(const float* src, int64_t rows, int64_t cols, int64_t ld,
                                uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(RoundToBfloat16)(src, rows, cols, ld, dst);
}

void round_floats_to_bfloat16(const float* src, int64_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(RoundFloatsToBfloat16)(src, n, dst);
}

void round_float_rows_to_bfloat16(const float* src, int64_t stride, int64_t rows, int64_t width,
                                  float* dst) {
  HWY_DYNAMIC_DISPATCH(RoundFloatRowsToBfloat16)(src, stride, rows, width, dst);
}

void widen_bfloat16(const uint16_t* src, int64_t stride, int64_t rows, int64_t width, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenBfloat16Rows)(src, stride, rows, width, dst);
}

void round_to_bfloat16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst) {
#if defined(__x86_64__)
  if (simd_has_bf16_products()) {
    RoundWithAvx512Bf16(src, rows, cols, ld, dst);
    return;
  }
#endif
  round_to_bfloat16_portable(src, rows, cols, ld, dst);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
