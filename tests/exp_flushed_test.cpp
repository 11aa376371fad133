// ExpFlushed (src/kernels/simd_common-inl.h), the softmax's exponential, on every SIMD target
// the CPU runs: within 2.5e−7 of std::exp (relative) on [−64, 88], exactly 1 at 0, and 0
// below −64, at −inf and for NaN (the kernels' masked scores and flushed probabilities).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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
// out[i] = ExpFlushed(x[i]); n a multiple of the widest vector (16).
void ExpFlushedArray(const float* x, size_t n, float* out) {
  const DF df;
  for (size_t i = 0; i < n; i += hn::Lanes(df))
    hn::StoreU(ExpFlushed(df, hn::LoadU(df, x + i)), df, out + i);
}
}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {
namespace {

HWY_EXPORT(ExpFlushedArray);

std::vector<float> exp_flushed(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  HWY_DYNAMIC_DISPATCH(ExpFlushedArray)(x.data(), x.size(), out.data());
  return out;
}

TEST(ExpFlushed, MatchesStdExpOnEveryTarget) {
  std::vector<float> x;
  for (float v = -64.0f; v <= 88.0f; v += 1.0f / 1024.0f) x.push_back(v);
  for (float v : {-1e-30f, 1e-7f, -0.34657359f, 0.34657359f, -63.99999f}) x.push_back(v);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);
  attn::testing::for_each_simd_target([&](const char* target) {
    const std::vector<float> e = exp_flushed(x);
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = std::exp(static_cast<double>(x[i]));
      const double error = std::abs(static_cast<double>(e[i]) - exact) / exact;
      if (error > worst) worst = error, at = i;
    }
    EXPECT_LT(worst, 2.5e-7) << target << ": worst at x = " << x[at] << ": " << e[at];
    EXPECT_EQ(exp_flushed(std::vector<float>(16, 0.0f))[0], 1.0f) << target;
  });
}

TEST(ExpFlushed, FlushesBelowMinus64AndMaskedScores) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {
      -64.001f, -80.0f, -88.0f, -100.0f, -1e30f, -inf, std::numeric_limits<float>::quiet_NaN()};
  x.resize(16, -65.0f);
  attn::testing::for_each_simd_target([&](const char* target) {
    for (float e : exp_flushed(x)) EXPECT_EQ(e, 0.0f) << target;
  });
}

}  // namespace
}  // namespace attn::kernels
#endif  // HWY_ONCE
