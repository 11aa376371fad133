// See reductions.hpp.
#include "src/kernels/reductions.hpp"

#include <algorithm>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/reductions.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Four independent accumulators hide the latency of the additions; floats are widened to
// double half a float vector at a time (Rebind gives a float tag as wide as the double one).
double SumOfSquares(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    const auto v0 = hn::PromoteTo(dd, hn::LoadU(df, x + i));
    const auto v1 = hn::PromoteTo(dd, hn::LoadU(df, x + i + lanes));
    const auto v2 = hn::PromoteTo(dd, hn::LoadU(df, x + i + 2 * lanes));
    const auto v3 = hn::PromoteTo(dd, hn::LoadU(df, x + i + 3 * lanes));
    a0 = hn::MulAdd(v0, v0, a0);
    a1 = hn::MulAdd(v1, v1, a1);
    a2 = hn::MulAdd(v2, v2, a2);
    a3 = hn::MulAdd(v3, v3, a3);
  }
  double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

void AddColumnSums(const float* HWY_RESTRICT m, int64_t rows, int64_t cols, int64_t ld,
                   float* HWY_RESTRICT sums) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  // Four vectors of columns at a time, each lane a running sum over the rows in order.
  for (; c + 4 * lanes <= cols; c += 4 * lanes) {
    auto s0 = hn::LoadU(d, sums + c), s1 = hn::LoadU(d, sums + c + lanes);
    auto s2 = hn::LoadU(d, sums + c + 2 * lanes), s3 = hn::LoadU(d, sums + c + 3 * lanes);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = m + r * ld + c;
      s0 = hn::Add(s0, hn::LoadU(d, row));
      s1 = hn::Add(s1, hn::LoadU(d, row + lanes));
      s2 = hn::Add(s2, hn::LoadU(d, row + 2 * lanes));
      s3 = hn::Add(s3, hn::LoadU(d, row + 3 * lanes));
    }
    hn::StoreU(s0, d, sums + c);
    hn::StoreU(s1, d, sums + c + lanes);
    hn::StoreU(s2, d, sums + c + 2 * lanes);
    hn::StoreU(s3, d, sums + c + 3 * lanes);
  }
  for (; c + lanes <= cols; c += lanes) {
    auto s = hn::LoadU(d, sums + c);
    for (int64_t r = 0; r < rows; ++r) s = hn::Add(s, hn::LoadU(d, m + r * ld + c));
    hn::StoreU(s, d, sums + c);
  }
  for (; c < cols; ++c) {
    float s = sums[c];
    for (int64_t r = 0; r < rows; ++r) s += m[r * ld + c];
    sums[c] = s;
  }
}

// x·0 is 0 for a finite x and NaN for NaN or ±inf, so one multiply-add per vector gathers
// the answer into accumulators that stay 0 until a non-finite value meets them. Four of them
// hide the multiply-add's latency: across a row when it holds four vectors or more, else
// across four rows at a time (a head of width 32 is two AVX-512 vectors: with one accumulator
// every multiply-add waited on the last, and the scans were 11 % of the small GPT's attention).
bool AnyNonFinite(const float* HWY_RESTRICT x, int64_t rows, int64_t width, int64_t stride) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  auto a0 = zero, a1 = zero, a2 = zero, a3 = zero;
  float tail = 0.0f;
  int64_t r = 0;
  if (width < 4 * lanes) {
    const int64_t whole = width / lanes * lanes;
    for (; r + 4 <= rows; r += 4) {
      const float* row = x + r * stride;
      for (int64_t i = 0; i < whole; i += lanes) {
        a0 = hn::MulAdd(hn::LoadU(d, row + i), zero, a0);
        a1 = hn::MulAdd(hn::LoadU(d, row + stride + i), zero, a1);
        a2 = hn::MulAdd(hn::LoadU(d, row + 2 * stride + i), zero, a2);
        a3 = hn::MulAdd(hn::LoadU(d, row + 3 * stride + i), zero, a3);
      }
      for (int64_t i = whole; i < width; ++i) {
        for (int64_t k = 0; k < 4; ++k) tail += row[k * stride + i] * 0.0f;
      }
    }
  }
  for (; r < rows; ++r) {
    const float* row = x + r * stride;
    int64_t i = 0;
    for (; i + 4 * lanes <= width; i += 4 * lanes) {
      a0 = hn::MulAdd(hn::LoadU(d, row + i), zero, a0);
      a1 = hn::MulAdd(hn::LoadU(d, row + i + lanes), zero, a1);
      a2 = hn::MulAdd(hn::LoadU(d, row + i + 2 * lanes), zero, a2);
      a3 = hn::MulAdd(hn::LoadU(d, row + i + 3 * lanes), zero, a3);
    }
    for (; i + lanes <= width; i += lanes) a0 = hn::MulAdd(hn::LoadU(d, row + i), zero, a0);
    for (; i < width; ++i) tail += row[i] * 0.0f;
  }
  const auto all = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
  return !hn::AllFalse(d, hn::IsNaN(all)) || tail != tail;
}

// As AnyNonFinite over bfloat16 words: a word is NaN or ±inf when its 8 exponent bits are all
// ones (0x7F80 under the mask), so the test is on the integers, with no widening.
bool AnyNonFiniteBfloat16(const uint16_t* HWY_RESTRICT x, int64_t rows, int64_t width,
                          int64_t stride) {
  const hn::ScalableTag<uint16_t> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto exponent = hn::Set(d, uint16_t{0x7F80});
  auto worst = hn::Zero(d);  // the largest masked exponent seen; 0x7F80 only for NaN and ±inf
  uint16_t tail = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = x + r * stride;
    int64_t i = 0;
    for (; i + lanes <= width; i += lanes)
      worst = hn::Max(worst, hn::And(hn::LoadU(d, row + i), exponent));
    for (; i < width; ++i) tail = std::max<uint16_t>(tail, row[i] & 0x7F80);
  }
  return !hn::AllFalse(d, hn::Eq(worst, exponent)) || tail == 0x7F80;
}

// As AnyNonFinite, over n contiguous floats, with -inf allowed (it hides a key in an additive
// mask): -inf becomes 0 before the multiply by 0 that turns NaN and +inf into NaN.
bool AnyNanOrPlusInf(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d), minus_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  auto a0 = zero, a1 = zero;
  auto step = [&](auto v, auto acc) {
    return hn::MulAdd(hn::IfThenZeroElse(hn::Eq(v, minus_inf), v), zero, acc);
  };
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    a0 = step(hn::LoadU(d, x + i), a0);
    a1 = step(hn::LoadU(d, x + i + lanes), a1);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += (x[i] == -std::numeric_limits<float>::infinity() ? 0.0f : x[i]) * 0.0f;
  return !hn::AllFalse(d, hn::IsNaN(hn::Add(a0, a1))) || tail != tail;
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(SumOfSquares);
HWY_EXPORT(AddColumnSums);
HWY_EXPORT(AnyNonFinite);
HWY_EXPORT(AnyNonFiniteBfloat16);
HWY_EXPORT(AnyNanOrPlusInf);

double sum_of_squares(const float* x, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(SumOfSquares)(x, n);
}

void add_column_sums(const float* m, int64_t rows, int64_t cols, int64_t ld, float* sums) {
  HWY_DYNAMIC_DISPATCH(AddColumnSums)(m, rows, cols, ld, sums);
}

bool any_non_finite(const float* x, int64_t rows, int64_t width, int64_t stride) {
  return HWY_DYNAMIC_DISPATCH(AnyNonFinite)(x, rows, width, stride);
}

bool any_non_finite(const uint16_t* x, int64_t rows, int64_t width, int64_t stride) {
  return HWY_DYNAMIC_DISPATCH(AnyNonFiniteBfloat16)(x, rows, width, stride);
}

bool any_nan_or_plus_inf(const float* x, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(AnyNanOrPlusInf)(x, n);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
