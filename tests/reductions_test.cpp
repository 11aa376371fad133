// The step's reductions (src/kernels/reductions.hpp) against plain loops: the sum of squares
// to double accuracy for every length (full vectors, partial tails, empty), the column sums
// bit for bit (they add the rows in the same order as the loop they replaced).
#include "src/kernels/reductions.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace attn::kernels {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(Reductions, SumOfSquaresMatchesLongDoubleForEveryLength) {
  const std::vector<float> x = random_floats(5000, 1);
  for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 1000, 4999, 5000}) {
    long double exact = 0.0L;
    for (int64_t i = 0; i < n; ++i) exact += static_cast<long double>(x[i]) * x[i];
    const double got = sum_of_squares(x.data(), n);
    EXPECT_NEAR(got, static_cast<double>(exact), 1e-13 * static_cast<double>(exact) + 1e-300)
        << "n = " << n;
  }
}

TEST(Reductions, SumOfSquaresSkipsNothingAndCountsEveryElementOnce) {
  // Ones at chosen places: the sum counts them, wherever they fall (full vectors or the tail).
  for (int64_t n : {1, 9, 16, 33, 64, 70, 200}) {
    for (int64_t at = 0; at < n; at += 5) {
      std::vector<float> x(static_cast<size_t>(n), 0.0f);
      x[static_cast<size_t>(at)] = 2.0f;
      EXPECT_EQ(sum_of_squares(x.data(), n), 4.0) << "n = " << n << ", at = " << at;
    }
  }
}

TEST(Reductions, SumOfSquaresPropagatesNonFiniteValues) {
  std::vector<float> x(40, 1.0f);
  x[37] = INFINITY;
  EXPECT_TRUE(std::isinf(sum_of_squares(x.data(), 40)));
  x[37] = NAN;
  EXPECT_TRUE(std::isnan(sum_of_squares(x.data(), 40)));
}

TEST(Reductions, ColumnSumsEqualThePlainLoopBitForBit) {
  const int64_t rows = 37, ld = 150;
  const std::vector<float> m = random_floats(static_cast<size_t>(rows * ld), 2);
  for (int64_t cols : {1, 5, 16, 17, 63, 64, 65, 100, 150}) {
    std::vector<float> expected = random_floats(static_cast<size_t>(cols), 3), got = expected;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        expected[static_cast<size_t>(c)] += m[static_cast<size_t>(r * ld + c)];
    }
    add_column_sums(m.data(), rows, cols, ld, got.data());
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(got[static_cast<size_t>(c)], expected[static_cast<size_t>(c)])
          << "cols = " << cols << ", c = " << c;
    }
  }
}

TEST(Reductions, ColumnSumsOfNoRowsLeaveTheSums) {
  std::vector<float> sums = {1.0f, 2.0f, 3.0f};
  const float unused = 0.0f;
  add_column_sums(&unused, 0, 3, 3, sums.data());
  EXPECT_EQ(sums, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

}  // namespace
}  // namespace attn::kernels
