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
constexpr int64_t kAheadBytes = 2048;  // prefetch 2 KiB ahead in each row
constexpr int64_t kLineBytes = 64;

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

// The kernels read R rows side by side, then the next R: row r's stream is row r of each
// group, `length` weights each, the groups R·ldw apart. The offset from a row's start of the
// weight `ahead` further along that stream: past the row's end, in the rows of the groups that
// follow. (A row of GPT-2's Wo or Wproj is 768 weights, shorter than two prefetch distances in
// float and than one in bf16: prefetching past its end into the next row, which another stream
// reads anyway, left the start of every group cold.)
inline int64_t AheadInStream(int64_t at, int64_t ahead, int64_t length, int64_t group_stride) {
  const int64_t target = at + ahead;
  return target < length ? target : target / length * group_stride + target % length;
}

// Rows per pass over y: four (one load and store of y per four rows). With the prefetch along
// the stream, 1 GiB of (3072, 768) matrices — Wproj's shape, far past the 260 MiB L3 — read at
// 21.9 / 19.5 GB/s in float on 2 threads of the Intel Xeon, 18.7 / 14.9 in bf16 (17.5 / 15.7
// and 14.0 / 13.8 prefetching within the row only), next to a plain read of 24.6 / 23.5 in the
// same runs. Two rows per pass read such matrices 5-20 % faster alone, but a whole GPT-2 token
// was no faster with them (bf16: 75-76 % of the limit against 78-82 %, alternating runs), so
// four stayed. The grouping does not change the sums: every y[j] takes the rows in order.
constexpr int kRowsPerPass = 4;

// y[0, n) += x[i]·W[i, 0, n) for the rows i of [0, k), kRowsPerPass rows per pass over y.
// Lanes past n are done one by one, in the same order.
template <class W>
void AddRows(const float* HWY_RESTRICT x, const W* HWY_RESTRICT w, int64_t k, int64_t n,
             int64_t ldw, float* HWY_RESTRICT y) {
  constexpr int R = kRowsPerPass;
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr int64_t ahead = kAheadBytes / sizeof(W), line = kLineBytes / sizeof(W);
  int64_t i = 0;
  for (; i + R <= k; i += R) {
    const W* rows[R];
    hn::Vec<decltype(d)> xs[R];
    for (int r = 0; r < R; ++r) {
      rows[r] = w + (i + r) * ldw;
      xs[r] = hn::Set(d, x[i + r]);
    }
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      if (j % line == 0) {
        const int64_t at = AheadInStream(j, ahead, n, R * ldw);
        for (int r = 0; r < R; ++r) __builtin_prefetch(rows[r] + at);
      }
      auto s = hn::LoadU(d, y + j);
      for (int r = 0; r < R; ++r) s = hn::MulAdd(xs[r], LoadWeights(d, rows[r] + j), s);
      hn::StoreU(s, d, y + j);
    }
    for (; j < n; ++j) {
      float s = y[j];
      for (int r = 0; r < R; ++r) s = std::fma(x[i + r], Widen(rows[r][j]), s);
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
    // Without it, bf16 rows of wte (half a float row's bytes per step) read 30-40 % slower.
    if (i % line == 0) {
      const int64_t at = AheadInStream(i, ahead, k, 4 * ldw);
      __builtin_prefetch(w0 + at);
      __builtin_prefetch(w1 + at);
      __builtin_prefetch(w2 + at);
      __builtin_prefetch(w3 + at);
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
