#include "src/kernels/q8_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/bfloat16.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/q8_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

void StoreQ8Row(const float* HWY_RESTRICT x, int64_t d, int8_t* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  auto largest_lanes = hn::Zero(df);
  int64_t e = 0;
  for (; e + n <= d; e += n) largest_lanes = hn::Max(largest_lanes, hn::Abs(hn::LoadU(df, x + e)));
  float largest = hn::GetLane(hn::MaxOfLanes(df, largest_lanes));
  for (int64_t tail = e; tail < d; ++tail) largest = std::max(largest, std::fabs(x[tail]));
  // (A max is exact in any order: the scale is the plain rule's.) The scale max|row| / 127 is
  // stored as the nearest bfloat16 (2 bytes a row instead of a float's 4: a d = 64 row is 66
  // bytes, not 68, and the decode reads the bytes) and the values are divided by that stored
  // scale: each within half its step, the row's largest within 2^-9 of itself where it is clamped
  // to 127. x · inf would be NaN for a zero, and NaN has no int8.
  const uint16_t scale = largest >= 1e-36f ? to_bfloat16(largest / 127.0f) : uint16_t{0};
  const float inverse = scale != 0 ? 1.0f / from_bfloat16(scale) : 0.0f;
  // |x / scale| ≤ 127 up to the scale's rounding; the clamp keeps it so. Round is to nearest,
  // ties to even, as std::nearbyint in the default rounding mode.
  const auto times = hn::Set(df, inverse), low = hn::Set(df, -127.0f), high = hn::Set(df, 127.0f);
  for (e = 0; e + n <= d; e += n) {
    const auto q = hn::Min(hn::Max(hn::Round(hn::Mul(hn::LoadU(df, x + e), times)), low), high);
    hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, q)), d8, out + e);
  }
  for (; e < d; ++e) {
    out[e] = static_cast<int8_t>(std::clamp(std::nearbyint(x[e] * inverse), -127.0f, 127.0f));
  }
  std::memcpy(out + d, &scale, sizeof scale);
}

void StoreQ8Rows(const float* x, int64_t stride, int64_t rows, int64_t d, int8_t* out,
                 int64_t out_stride) {
  for (int64_t t = 0; t < rows; ++t) StoreQ8Row(x + t * stride, d, out + t * out_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(StoreQ8Rows);

void store_q8_rows(const float* x, int64_t stride, int64_t rows, int64_t d, int8_t* out,
                   int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(StoreQ8Rows)(x, stride, rows, d, out, out_stride);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
