// ExpFlushed, Exp2Flushed and Exp2ForBfloat16 (src/kernels/simd_common-inl.h), the softmax's
// exponentials, on every SIMD target the CPU runs: within 2.5e−7 of std::exp (relative) on
// [−64, 88], and of std::exp2 on [−92, 127] (3e−6 for the bf16 one); exactly 1 at 0; and 0 below
// −64 (−92), at −inf and for NaN (the kernels' masked scores and flushed probabilities).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "simd_targets.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/exp_flushed_test.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
// out[i] = ExpFlushed(x[i]), Exp2Flushed or Exp2ForBfloat16 (kind 0, 1, 2); n a multiple of
// the widest vector (16).
void ExpFlushedArray(const float* x, size_t n, int kind, float* out) {
  const DF df;
  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    const VF v = hn::LoadU(df, x + i);
    const VF e = kind == 0   ? ExpFlushed(df, v)
                 : kind == 1 ? Exp2Flushed(df, v)
                             : Exp2ForBfloat16(df, v);
    hn::StoreU(e, df, out + i);
  }
}
}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {
namespace {

HWY_EXPORT(ExpFlushedArray);

enum Kind { kExp, kExp2, kExp2ForBfloat16 };

std::vector<float> exp_flushed(const std::vector<float>& x, Kind kind = kExp) {
  std::vector<float> out(x.size());
  HWY_DYNAMIC_DISPATCH(ExpFlushedArray)(x.data(), x.size(), kind, out.data());
  return out;
}

// The worst relative error of exp (or exp2) on [low, high] in steps of 1/1024, plus the points
// either side of the reduction's interval ends, against the double-precision function.
void ExpectAccurate(Kind kind, float low, float high, double bound = 2.5e-7) {
  const bool base2 = kind != kExp;
  const float half_step = base2 ? 0.5f : 0.34657359f;  // |r| ≤ ½ (base 2), ln2/2 (base e)
  std::vector<float> x;
  for (float v = low; v <= high; v += 1.0f / 1024.0f) x.push_back(v);
  for (float v : {-1e-30f, 1e-7f, -half_step, half_step, low + 1e-5f}) x.push_back(v);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);
  attn::testing::for_each_simd_target([&](const char* target) {
    const std::vector<float> e = exp_flushed(x, kind);
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const auto xi = static_cast<double>(x[i]);
      const double exact = base2 ? std::exp2(xi) : std::exp(xi);
      const double error = std::abs(static_cast<double>(e[i]) - exact) / exact;
      if (error > worst) worst = error, at = i;
    }
    EXPECT_LT(worst, bound) << target << ": worst at x = " << x[at] << ": " << e[at];
    EXPECT_EQ(exp_flushed(std::vector<float>(16, 0.0f), kind)[0], 1.0f) << target;
  });
}

TEST(ExpFlushed, MatchesStdExpOnEveryTarget) { ExpectAccurate(kExp, -64.0f, 88.0f); }

TEST(Exp2Flushed, MatchesStdExp2OnEveryTarget) { ExpectAccurate(kExp2, -92.0f, 127.0f); }

// The degree-4 polynomial's 2.9e-6, three orders below the bfloat16 rounding that follows it.
TEST(Exp2ForBfloat16, MatchesStdExp2ToItsPolynomialsErrorOnEveryTarget) {
  ExpectAccurate(kExp2ForBfloat16, -92.0f, 127.0f, 3e-6);
}

// AVX-512's Exp2Flushed takes x − round(x) and the scaling by 2^n from single instructions
// (vreduceps, vscalefps) where the other targets use integer tricks; the rounding and the
// polynomial are the same, so the bits must be too. Compared with AVX2, whose FMAs round as
// AVX-512's do (targets without FMA round the polynomial's steps twice).
TEST(Exp2Flushed, Avx512GivesAvx2sBits) {
  std::vector<float> x;
  for (float v = -95.0f; v <= 128.0f; v += 1.0f / 64.0f) x.push_back(v);
  for (float v = -1.0f; v <= 1.0f; v += 1.0f / 4096.0f) x.push_back(v);
  for (float v : {-0.5f, 0.5f, -1.5f, 1.5f, -91.5f, -92.0f, 127.0f, 127.5f, 200.0f}) x.push_back(v);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);
  std::vector<float> avx2;
  int avx512_targets = 0;
  attn::testing::for_each_simd_target([&](const char* target) {
    if (std::string(target) == "AVX2") avx2 = exp_flushed(x, kExp2);
  });
  if (avx2.empty()) GTEST_SKIP() << "this CPU or build has no AVX2 target to compare with";
  attn::testing::for_each_simd_target([&](const char* target) {
    if (std::string(target).rfind("AVX3", 0) != 0) return;
    ++avx512_targets;
    const std::vector<float> e = exp_flushed(x, kExp2);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(e[i]), std::bit_cast<uint32_t>(avx2[i]))
          << target << " at x = " << x[i] << ": " << e[i] << " against AVX2's " << avx2[i];
    }
  });
  if (avx512_targets == 0) GTEST_SKIP() << "this CPU has no AVX-512 target";
}

void ExpectFlushed(Kind kind, std::vector<float> x) {
  x.resize(16, -200.0f);
  attn::testing::for_each_simd_target([&](const char* target) {
    for (float e : exp_flushed(x, kind)) EXPECT_EQ(e, 0.0f) << target;
  });
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(ExpFlushed, FlushesBelowMinus64AndMaskedScores) {
  ExpectFlushed(kExp, {-64.001f, -65.0f, -80.0f, -88.0f, -100.0f, -1e30f, -kInf, kNaN});
}

TEST(Exp2Flushed, FlushesBelowMinus92AndMaskedScores) {
  ExpectFlushed(kExp2, {-92.001f, -93.0f, -126.0f, -127.0f, -150.0f, -1e30f, -kInf, kNaN});
}

TEST(Exp2ForBfloat16, FlushesBelowMinus92AndMaskedScores) {
  ExpectFlushed(kExp2ForBfloat16,
                {-92.001f, -93.0f, -126.0f, -127.0f, -150.0f, -1e30f, -kInf, kNaN});
}

}  // namespace
}  // namespace attn::kernels
#endif  // HWY_ONCE
