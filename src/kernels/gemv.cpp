// See gemv.hpp.
#include "src/kernels/gemv.hpp"

#include <algorithm>
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
constexpr int64_t kAhead = 512;  // floats: prefetch 2 KiB ahead in each row

// y[0, n) += x[i]·W[i, 0, n) for the rows i of [0, k), four rows per pass over y: one load and
// one store of y per four rows. Lanes past n are done one by one, in the same order.
void AddRows(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, int64_t k, int64_t n,
             int64_t ldw, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    const float* w0 = w + i * ldw;
    const float *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    const auto x0 = hn::Set(d, x[i]), x1 = hn::Set(d, x[i + 1]);
    const auto x2 = hn::Set(d, x[i + 2]), x3 = hn::Set(d, x[i + 3]);
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      if (j % 16 == 0) {
        __builtin_prefetch(w0 + j + kAhead);
        __builtin_prefetch(w1 + j + kAhead);
        __builtin_prefetch(w2 + j + kAhead);
        __builtin_prefetch(w3 + j + kAhead);
      }
      auto s = hn::LoadU(d, y + j);
      s = hn::MulAdd(x0, hn::LoadU(d, w0 + j), s);
      s = hn::MulAdd(x1, hn::LoadU(d, w1 + j), s);
      s = hn::MulAdd(x2, hn::LoadU(d, w2 + j), s);
      s = hn::MulAdd(x3, hn::LoadU(d, w3 + j), s);
      hn::StoreU(s, d, y + j);
    }
    for (; j < n; ++j) {
      float s = y[j];
      s = std::fma(x[i], w0[j], s);
      s = std::fma(x[i + 1], w1[j], s);
      s = std::fma(x[i + 2], w2[j], s);
      s = std::fma(x[i + 3], w3[j], s);
      y[j] = s;
    }
  }
  for (; i < k; ++i) {
    const float* row = w + i * ldw;
    const auto xi = hn::Set(d, x[i]);
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      hn::StoreU(hn::MulAdd(xi, hn::LoadU(d, row + j), hn::LoadU(d, y + j)), d, y + j);
    }
    for (; j < n; ++j) y[j] = std::fma(x[i], row[j], y[j]);
  }
}

void GemvRows(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, int64_t k, int64_t n,
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
void Dots4(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w0, int64_t k, int64_t ldw,
           float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const float *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    const auto xv = hn::LoadU(d, x + i);
    s0 = hn::MulAdd(xv, hn::LoadU(d, w0 + i), s0);
    s1 = hn::MulAdd(xv, hn::LoadU(d, w1 + i), s1);
    s2 = hn::MulAdd(xv, hn::LoadU(d, w2 + i), s2);
    s3 = hn::MulAdd(xv, hn::LoadU(d, w3 + i), s3);
  }
  float r[4] = {hn::GetLane(hn::SumOfLanes(d, s0)), hn::GetLane(hn::SumOfLanes(d, s1)),
                hn::GetLane(hn::SumOfLanes(d, s2)), hn::GetLane(hn::SumOfLanes(d, s3))};
  for (; i < k; ++i) {
    r[0] = std::fma(x[i], w0[i], r[0]);
    r[1] = std::fma(x[i], w1[i], r[1]);
    r[2] = std::fma(x[i], w2[i], r[2]);
    r[3] = std::fma(x[i], w3[i], r[3]);
  }
  std::copy(r, r + 4, out);
}

float Dot(const float* HWY_RESTRICT x, const float* HWY_RESTRICT row, int64_t k) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto s = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) s = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, row + i), s);
  float r = hn::GetLane(hn::SumOfLanes(d, s));
  for (; i < k; ++i) r = std::fma(x[i], row[i], r);
  return r;
}

void GemvDots(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, int64_t k, int64_t n,
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

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(GemvRows);
HWY_EXPORT(GemvDots);

void gemv_rows(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvRows)(x, w, k, n, ldw, alpha, beta, y);
}

void gemv_dots(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y) {
  HWY_DYNAMIC_DISPATCH(GemvDots)(x, w, k, n, ldw, alpha, beta, y);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
