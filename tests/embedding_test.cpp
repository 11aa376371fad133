// Sinusoidal positional encoding: the formula at known points, odd widths, the errors.
#include "attn/embedding.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.hpp"

namespace attn {
namespace {

TEST(SinusoidalEncoding, MatchesTheFormula) {
  const Tensor pe = sinusoidal_encoding(50, 16);
  for (int64_t c = 0; c < 16; ++c) EXPECT_EQ(pe.at({0, c}), c % 2 == 0 ? 0.0f : 1.0f);
  EXPECT_NEAR(pe.at({7, 0}), std::sin(7.0), 1e-6);
  EXPECT_NEAR(pe.at({7, 1}), std::cos(7.0), 1e-6);
  // Column pair (2i, 2i+1) = (6, 7): frequency 1 / 10000^(6/16).
  const double angle = 33.0 / std::pow(10000.0, 6.0 / 16.0);
  EXPECT_NEAR(pe.at({33, 6}), std::sin(angle), 1e-6);
  EXPECT_NEAR(pe.at({33, 7}), std::cos(angle), 1e-6);
}

TEST(SinusoidalEncoding, OddWidthEndsWithASine) {
  const Tensor pe = sinusoidal_encoding(4, 5);
  EXPECT_NEAR(pe.at({3, 4}), std::sin(3.0 / std::pow(10000.0, 4.0 / 5.0)), 1e-6);
}

TEST(AddPositional, AddsTheTableToEveryBatchEntry) {
  const Tensor pe = sinusoidal_encoding(10, 4);
  const Tensor x = Tensor::full({2, 3, 4}, 1.0f);
  const Tensor y = add_positional(x, pe);
  EXPECT_FLOAT_EQ(y.at({1, 2, 1}), 1.0f + pe.at({2, 1}));
  EXPECT_EQ(x.at({1, 2, 1}), 1.0f);  // the input is left alone
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        add_positional(Tensor({11, 4}), pe);
      },
      "sequence length 11 exceeds max_len 10"));
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        add_positional(Tensor({3, 5}), pe);
      },
      "pe must be (max_len, 5)"));
  EXPECT_TRUE(testing::ThrowsWith([] { sinusoidal_encoding(0, 4); }, "must be >= 1"));
}

}  // namespace
}  // namespace attn
