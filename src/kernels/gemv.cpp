// See gemv.hpp.
#include "src/kernels/gemv.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/gemv.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Columns in pieces of this many floats, so the running sums of a piece stay in L1 while
// the rows stream past (and a piece of every row is one run of addresses).
constexpr int64_t kPiece = 4096;
constexpr int64_t kAheadBytes = 2048;  // prefetch 2 KiB ahead in each row
constexpr int64_t kLineBytes = 64;

// The weights are float or bfloat16 (a float's top 16 bits): loaded as floats either way, so
// the sums, their order and x are the same for both.
inline float Widen(float w) { return w; }
inline float Widen(uint16_t w) { return std::bit_cast<float>(uint32_t{w} << 16); }

template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<D> du32;
  const hn::Rebind<uint16_t, D> du16;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// y[0, n) += x[i]·W[i, 0, n) for the rows i of [0, k), four rows per pass over y: one load and
// one store of y per four rows. Lanes past n are done one by one, in the same order.
template <class W>
void AddRows(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w, int64_t k, int64_t n,
             int64_t ldw, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr int64_t ahead = kAheadBytes / sizeof(W), line = kLineBytes / sizeof(W);
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    const W* w0 = w + i * ldw;
    const W *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    const auto x0 = hn::Set(d, x[i]), x1 = hn::Set(d, x[i + 1]);
    const auto x2 = hn::Set(d, x[i + 2]), x3 = hn::Set(d, x[i + 3]);
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      if (j % line == 0) {
        __builtin_prefetch(w0 + j + ahead);
        __builtin_prefetch(w1 + j + ahead);
        __builtin_prefetch(w2 + j + ahead);
        __builtin_prefetch(w3 + j + ahead);
      }
      auto s = hn::LoadU(d, y + j);
      s = hn::MulAdd(x0, LoadWeights(d, w0 + j), s);
      s = hn::MulAdd(x1, LoadWeights(d, w1 + j), s);
      s = hn::MulAdd(x2, LoadWeights(d, w2 + j), s);
      s = hn::MulAdd(x3, LoadWeights(d, w3 + j), s);
      hn::StoreU(s, d, y + j);
    }
    for (; j < n; ++j) {
      float s = y[j];
      s = std::fma(x[i], Widen(w0[j]), s);
      s = std::fma(x[i + 1], Widen(w1[j]), s);
      s = std::fma(x[i + 2], Widen(w2[j]), s);
      s = std::fma(x[i + 3], Widen(w3[j]), s);
      y[j] = s;
    }
  }
  for (; i < k; ++i) {
    const W* row = w + i * ldw;
    const auto xi = hn::Set(d, x[i]);
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      hn::StoreU(hn::MulAdd(xi, LoadWeights(d, row + j), hn::LoadU(d, y + j)), d, y + j);
    }
    for (; j < n; ++j) y[j] = std::fma(x[i], Widen(row[j]), y[j]);
  }
}

template <class W>
void RowsTimesVector(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w, int64_t k, int64_t n,
                     int64_t ldw, float alpha, float beta, float* HWY_RESTRICT y) {
  float sums[kPiece];
  for (int64_t j0 = 0; j0 < n; j0 += kPiece) {
    const int64_t cols = std::min(kPiece, n - j0);
    std::fill(sums, sums + cols, 0.0f);
    AddRows(x, w + j0, k, cols, ldw, sums);
    for (int64_t j = 0; j < cols; ++j) {
      y[j0 + j] = beta == 0.0f ? alpha * sums[j] : alpha * sums[j] + beta * y[j0 + j];
    }
  }
}

// dot(x, row) for four rows at once: x is loaded once per four rows.
template <class W>
void Dots4(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w0, int64_t k, int64_t ldw,
           float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const W *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
  constexpr int64_t ahead = kAheadBytes / sizeof(W), line = kLineBytes / sizeof(W);
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    // Without it bf16 rows (half a float row's bytes per step) read at 60-70 % of the rate.
    if (i % line == 0) {
      __builtin_prefetch(w0 + i + ahead);
      __builtin_prefetch(w1 + i + ahead);
      __builtin_prefetch(w2 + i + ahead);
      __builtin_prefetch(w3 + i + ahead);
    }
    const auto xv = hn::LoadU(d, x + i);
    s0 = hn::MulAdd(xv, LoadWeights(d, w0 + i), s0);
    s1 = hn::MulAdd(xv, LoadWeights(d, w1 + i), s1);
    s2 = hn::MulAdd(xv, LoadWeights(d, w2 + i), s2);
    s3 = hn::MulAdd(xv, LoadWeights(d, w3 + i), s3);
  }
  float r[4] = {hn::GetLane(hn::SumOfLanes(d, s0)), hn::GetLane(hn::SumOfLanes(d, s1)),
                hn::GetLane(hn::SumOfLanes(d, s2)), hn::GetLane(hn::SumOfLanes(d, s3))};
  for (; i < k; ++i) {
    r[0] = std::fma(x[i], Widen(w0[i]), r[0]);
    r[1] = std::fma(x[i], Widen(w1[i]), r[1]);
    r[2] = std::fma(x[i], Widen(w2[i]), r[2]);
    r[3] = std::fma(x[i], Widen(w3[i]), r[3]);
  }
  std::copy(r, r + 4, out);
}

template <class W>
float Dot(const float* HWY_RESTRICT x, const W* HWY_RESTRICT row, int64_t k) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto s = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    s = hn::MulAdd(hn::LoadU(d, x + i), LoadWeights(d, row + i), s);
  }
  float r = hn::GetLane(hn::SumOfLanes(d, s));
  for (; i < k; ++i) r = std::fma(x[i], Widen(row[i]), r);
  return r;
}

template <class W>
void DotsWithRows(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w, int64_t k, int64_t n,
                  int64_t ldw, float alpha, float beta, float* HWY_RESTRICT y) {
  float dots[4];
  const auto store = [&](int64_t j, float dot) {
    y[j] = beta == 0.0f ? alpha * dot : alpha * dot + beta * y[j];
  };
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    Dots4(x, w + j * ldw, k, ldw, dots);
    for (int r = 0; r < 4; ++r) store(j + r, dots[r]);
  }
  for (; j < n; ++j) store(j, Dot(x, w + j * ldw, k));
}

void GemvRows(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
              float beta, float* y) {
  RowsTimesVector(x, w, k, n, ldw, alpha, beta, y);
}
void GemvRowsBf16(const float* x, const uint16_t* w, int64_t k, int64_t n, int64_t ldw, float alpha,
                  float beta, float* y) {
  RowsTimesVector(x, w, k, n, ldw, alpha, beta, y);
}
void GemvDots(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
              float beta, float* y) {
  DotsWithRows(x, w, k, n, ldw, alpha, beta, y);
}
void GemvDotsBf16(const float* x, const uint16_t* w, int64_t k, int64_t n, int64_t ldw, float alpha,
                  float beta, float* y) {
  DotsWithRows(x, w, k, n, ldw, alpha, beta, y);
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(GemvRows);
HWY_EXPORT(GemvRowsBf16);
HWY_EXPORT(GemvDots);
HWY_EXPORT(GemvDotsBf16);

void gemv_rows(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvRows)(x, w, k, n, ldw, alpha, beta, y);
}

void gemv_dots(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvDots)(x, w, k, n, ldw, alpha, beta, y);
}

void gemv_rows(const float* x, const uint16_t* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvRowsBf16)(x, w, k, n, ldw, alpha, beta, y);
}

void gemv_dots(const float* x, const uint16_t* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvDotsBf16)(x, w, k, n, ldw, alpha, beta, y);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
