// See gemv.hpp.
#include "src/kernels/gemv.hpp"

#include <algorithm>
#include <cmath>

#include "attn/bfloat16.hpp"

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

// The weights are float or bfloat16 (a float's top 16 bits): loaded as floats either way, so
// the sums, their order and x are the same for both.
inline float Widen(float w) { return w; }
inline float Widen(uint16_t w) { return from_bfloat16(w); }

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

// Both kernels read four rows side by side, and the four are the first rows of the four
// quarters of the rows they are given, not four neighbours: each of the four streams of
// addresses then runs on through its quarter without a jump, and the CPU's own prefetchers
// follow four long runs. Four neighbouring rows made four streams a row long that jumped four
// rows ahead after each row; the prefetchers lost them at every jump, and a software prefetch
// along each stream won back only part of it (after this change it cost 15-25 %, so it went).
// One thread of the Zen 3 (bench/gemv_streams.cpp), GB/s before → after: x·W float 18-24 →
// 28-30, bfloat16 15-19 → 26-28; the logits' dot products float 19 → 29-30, bfloat16 15-16 →
// 30; a plain read of four streams 27-29. Each y[j] still sums in an order fixed by k alone
// (x·W: the quarters' first rows, then their second rows, …), as results independent of the
// thread count need.
constexpr int kStreams = 4;

// y[0, n) += x[i]·W[i, 0, n) for the rows i of [0, k): rows q, q + k/4, q + 2k/4, q + 3k/4 in
// one pass over y for each q < k/4, then the k mod 4 last rows one per pass. Lanes past n are
// done one by one, in the same order.
template <class W>
void AddRows(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w, int64_t k, int64_t n,
             int64_t ldw, float* HWY_RESTRICT y) {
  constexpr int R = kStreams;
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t quarter = k / R;
  for (int64_t q = 0; q < quarter; ++q) {
    const W* rows[R];
    hn::Vec<decltype(d)> xs[R];
    float x_of[R];
    for (int r = 0; r < R; ++r) {
      rows[r] = w + (q + r * quarter) * ldw;
      x_of[r] = x[q + r * quarter];
      xs[r] = hn::Set(d, x_of[r]);
    }
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      auto s = hn::LoadU(d, y + j);
      for (int r = 0; r < R; ++r) s = hn::MulAdd(xs[r], LoadWeights(d, rows[r] + j), s);
      hn::StoreU(s, d, y + j);
    }
    for (; j < n; ++j) {
      float s = y[j];
      for (int r = 0; r < R; ++r) s = std::fma(x_of[r], Widen(rows[r][j]), s);
      y[j] = s;
    }
  }
  for (int64_t i = R * quarter; i < k; ++i) {
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

// dot(x, row) for four rows `apart` rows apart at once: x is loaded once per four rows.
template <class W>
void Dots4(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w0, int64_t k, int64_t ldw,
           int64_t apart, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const W *w1 = w0 + apart * ldw, *w2 = w1 + apart * ldw, *w3 = w2 + apart * ldw;
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
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
  // Rows j, j + n/4, j + 2n/4, j + 3n/4 together (see kStreams); a row's sum does not depend
  // on which rows it is read with.
  const int64_t quarter = n / kStreams;
  for (int64_t j = 0; j < quarter; ++j) {
    Dots4(x, w + j * ldw, k, ldw, quarter, dots);
    for (int r = 0; r < 4; ++r) store(j + r * quarter, dots[r]);
  }
  for (int64_t j = kStreams * quarter; j < n; ++j) store(j, Dot(x, w + j * ldw, k));
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
