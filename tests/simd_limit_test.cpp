// limit_simd (attn/simd.hpp): a cap moves Highway's dispatch — checked by what a dispatched
// function reports, not by the name alone — the capped kernels still compute the same
// attention, and a cap oneDNN can no longer take is an error. A program of its own, because a
// cap is the whole process's: the tests run in this file's order (ctest runs each alone).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/random.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/sdpa.hpp"
#include "attn/simd.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/simd_limit_test.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::testing {
namespace HWY_NAMESPACE {
int64_t DispatchedTarget() { return HWY_TARGET; }
}  // namespace HWY_NAMESPACE
}  // namespace attn::testing
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::testing {
namespace {

HWY_EXPORT(DispatchedTarget);

int64_t dispatched() { return HWY_DYNAMIC_DISPATCH(DispatchedTarget)(); }

// Whether the CPU runs `target`, asked with no cap. (Highway's SupportedTargets also resets
// the dispatch to every target the CPU has: limit_simd, after, sets it again.)
bool cpu_runs(int64_t target) {
  limit_simd("best");
  return (hwy::SupportedTargets() & target) != 0;
}

float worst_difference(const Tensor& a, const Tensor& b) {
  float worst = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]));
  return worst;
}

TEST(SimdLimit, MovesTheDispatchAndKeepsTheAnswer) {
  const Tensor q = rand_normal({1, 2, 37, 24}, 1), k = rand_normal({1, 2, 37, 24}, 2),
               v = rand_normal({1, 2, 37, 24}, 3);
  SdpaOptions causal;
  causal.causal = true;
  const Tensor expected = reference::sdpa(q, k, v, causal).output;
  const std::string best = simd_target();
  const int64_t best_target = dispatched();
  for (const auto& [name, target] :
       {std::pair{"avx2", HWY_AVX2}, std::pair{"portable", HWY_STATIC_TARGET},
        std::pair{"avx512", HWY_AVX3}}) {
    if (!cpu_runs(target)) {
      EXPECT_THROW(limit_simd(name), Error) << name;
      continue;
    }
    limit_simd(name);
    EXPECT_EQ(simd_target(), hwy::TargetName(target)) << name;
    EXPECT_EQ(dispatched(), target) << name;  // the kernels' dispatch, not just the name
    EXPECT_LT(worst_difference(sdpa(q, k, v, causal).output, expected), 1e-5f) << name;
  }
  limit_simd("best");
  EXPECT_EQ(simd_target(), best);
  EXPECT_EQ(dispatched(), best_target);
}

TEST(SimdLimit, UnknownNamesAreErrors) {
  for (const char* name : {"", "AVX2", "sse", "avx"}) EXPECT_THROW(limit_simd(name), Error) << name;
  EXPECT_NO_THROW(limit_simd("best"));
}

TEST(SimdLimit, ACapAfterTheFirstMatrixProductIsAnError) {
  const Tensor a = rand_normal({4, 4}, 4);
  const Tensor product = matmul(a, a);  // opens oneDNN with no cap
  EXPECT_LT(worst_difference(product, reference::matmul(a, a)), 1e-5f);
  if (!cpu_runs(HWY_AVX2)) GTEST_SKIP() << "this CPU has no AVX2 to cap at";
  try {
    limit_simd("avx2");
    FAIL() << "a cap after oneDNN opened was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after the first matrix product"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(limit_simd("best"));  // the cap oneDNN has: no change
}

}  // namespace
}  // namespace attn::testing
#endif  // HWY_ONCE
