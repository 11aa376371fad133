// Reference softmax: known values, stability, masked entries and fully masked rows.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/sdpa.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::kInf;

TEST(Softmax, KnownValues) {
  const Tensor y = reference::softmax(Tensor::from_values({1, 3}, {1, 2, 3}));
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(y.at({0, 0}), std::exp(1.0) / z, 1e-7);
  EXPECT_NEAR(y.at({0, 1}), std::exp(2.0) / z, 1e-7);
  EXPECT_NEAR(y.at({0, 2}), std::exp(3.0) / z, 1e-7);
}

TEST(Softmax, LargeScoresDoNotOverflow) {
  const Tensor y = reference::softmax(Tensor::from_values({2}, {1000, 1000}));
  EXPECT_FLOAT_EQ(y.at({0}), 0.5f);
  EXPECT_FLOAT_EQ(y.at({1}), 0.5f);
}

TEST(Softmax, MinusInfinityGetsZeroAndAllMaskedRowIsZero) {
  const Tensor y =
      reference::softmax(Tensor::from_values({2, 3}, {0, -kInf, 0, -kInf, -kInf, -kInf}));
  EXPECT_FLOAT_EQ(y.at({0, 0}), 0.5f);
  EXPECT_EQ(y.at({0, 1}), 0.0f);
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(y.at({1, j}), 0.0f);
}

TEST(Softmax, WorksOnViewsAndLeavesInputAlone) {
  const Tensor x = Tensor::from_values({2, 2}, {0, 1, 2, 3});
  const Tensor y = reference::softmax(x.transpose(0, 1));  // rows (0, 2) and (1, 3)
  EXPECT_NEAR(y.at({0, 1}), 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_EQ(x.at({1, 0}), 2.0f);
}

}  // namespace
}  // namespace attn
