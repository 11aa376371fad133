// GELU, tanh form (src/nn/gelu.hpp), forward and backward against the formulas in double:
// to float accuracy where the values are ordinary, to a relative 1e-4 deep in the negative
// tail (where ½·(1 + tanh u) cancels in float), and finite for any finite input.
#include "src/nn/gelu.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace attn::nn {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

// The oracle, in double. ½·(1 + tanh u) = 1/(1 + e^(−2u)) exactly; the tanh form cancels to
// 0 even in double once u < −19 (x < −6), so the oracle uses the exponential and is checked
// against the tanh form where that one is exact.
double half_one_plus_tanh(double x) {
  return 1.0 / (1.0 + std::exp(-2.0 * kSqrt2OverPi * (x + kCubic * x * x * x)));
}

double gelu_double(double x) { return x * half_one_plus_tanh(x); }

double gelu_grad_double(double x) {
  const double s = half_one_plus_tanh(x);  // ½·(1 + t); ½·(1 − t²) = 2·s·(1 − s)
  return s + 2.0 * x * s * (1.0 - s) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
}

TEST(Gelu, TheOracleIsTheTanhForm) {
  for (double x = -4.0; x <= 4.0; x += 0.13) {
    const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    EXPECT_NEAR(gelu_double(x), 0.5 * x * (1.0 + t), 1e-14) << "x = " << x;
    EXPECT_NEAR(
        gelu_grad_double(x),
        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x),
        1e-14)
        << "x = " << x;
  }
}

// x from −12 to 12 in steps of 1/64, plus an odd count so the last vector is partial.
std::vector<float> sweep() {
  std::vector<float> x;
  for (int i = -12 * 64; i <= 12 * 64; ++i) x.push_back(static_cast<float>(i) / 64.0f);
  x.push_back(0.3f);
  return x;
}

TEST(Gelu, TheDerivativeFormulaIsTheSlopeOfTheFunction) {
  // The test's own oracle, checked by central differences in double.
  for (double x = -6.0; x <= 6.0; x += 0.37) {
    const double h = 1e-5;
    const double slope = (gelu_double(x + h) - gelu_double(x - h)) / (2 * h);
    EXPECT_NEAR(gelu_grad_double(x), slope, 1e-8) << "x = " << x;
  }
}

TEST(Gelu, ForwardMatchesTheFormulaInDouble) {
  const std::vector<float> x = sweep();
  std::vector<float> y(x.size());
  gelu_forward(x.data(), static_cast<int64_t>(x.size()), y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = gelu_double(x[i]);
    // x ≥ 0: to float's rounding of x. x < 0: relative, down to where the values leave
    // float's normal range (gelu(−9) ≈ −1e−37).
    const double floor = x[i] >= 0 ? 1e-6 * std::fmax(1.0, x[i]) : 1e-36;
    EXPECT_NEAR(y[i], want, 1e-4 * std::fabs(want) + floor) << "x = " << x[i];
  }
}

TEST(Gelu, BackwardMatchesTheDerivativeInDouble) {
  const std::vector<float> x = sweep();
  std::vector<float> dy(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    dy[i] = 1.0f + 0.5f * std::sin(0.7f * static_cast<float>(i));
  gelu_backward(dy.data(), x.data(), static_cast<int64_t>(x.size()), dx.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = dy[i] * gelu_grad_double(x[i]);
    // Absolute near gelu' = 0 (x ≈ −0.75), relative in the tail down to ~1e−34 (below
    // x ≈ −10.5 the kernel's clamped exponent leaves ~1e−36 where the slope is smaller still).
    const double floor = x[i] > -3 ? 1e-5 : 1e-34;
    EXPECT_NEAR(dx[i], want, 1e-4 * std::fabs(want) + floor) << "x = " << x[i];
  }
  // dx may alias dy.
  std::vector<float> in_place = dy;
  gelu_backward(in_place.data(), x.data(), static_cast<int64_t>(x.size()), in_place.data());
  EXPECT_EQ(in_place, dx);
}

TEST(Gelu, ExtremeInputsGiveTheLimits) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-FLT_MAX, -1e30f, -1e13f,  -50.0f, 50.0f,
                                1e13f,    1e30f,  FLT_MAX, -inf,   inf};
  std::vector<float> y(x.size()), ones(x.size(), 1.0f), dx(x.size());
  gelu_forward(x.data(), static_cast<int64_t>(x.size()), y.data());
  gelu_backward(ones.data(), x.data(), static_cast<int64_t>(x.size()), dx.data());
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < 0) {
      EXPECT_EQ(y[i], 0.0f) << "gelu(" << x[i] << ")";
      EXPECT_NEAR(dx[i], 0.0f, 1e-30f) << "gelu'(" << x[i] << ")";
    } else {
      EXPECT_EQ(y[i], x[i]) << "gelu(" << x[i] << ")";
      EXPECT_EQ(dx[i], 1.0f) << "gelu'(" << x[i] << ")";
    }
  }
}

TEST(Gelu, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {1.0f, nan, -1.0f};
  std::vector<float> y(3), ones(3, 1.0f), dx(3);
  gelu_forward(x.data(), 3, y.data());
  gelu_backward(ones.data(), x.data(), 3, dx.data());
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_TRUE(std::isnan(dx[1]));
  EXPECT_FALSE(std::isnan(y[0]) || std::isnan(y[2]) || std::isnan(dx[0]) || std::isnan(dx[2]));
}

}  // namespace
}  // namespace attn::nn
