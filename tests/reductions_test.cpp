// The step's reductions (src/kernels/reductions.hpp) against plain loops: the sum of squares
// to double accuracy for every length (full vectors, partial tails, empty), the column sums
// bit for bit (they add the rows in the same order as the loop they replaced), and the scan for
// NaN and ±inf over strided rows at every position of short and long rows.
#include "src/kernels/reductions.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "simd_targets.hpp"

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

TEST(Reductions, AnyNonFiniteFindsEveryPositionOfStridedRows) {
  // Widths below and above four vectors of each target (the short rows take four rows at a
  // time), row counts around multiples of four, rows longer than their width apart.
  constexpr float kBad[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  testing::for_each_simd_target([&](const char* target) {
    for (int64_t width : {1, 5, 8, 16, 17, 32, 40, 64, 70}) {
      for (int64_t rows : {1, 3, 4, 5, 9}) {
        const int64_t stride = width + 3;
        // Finite values near float32's largest: their sums would overflow, the scan must not.
        std::vector<float> x(static_cast<size_t>(rows * stride), 3e38f);
        EXPECT_FALSE(any_non_finite(x.data(), rows, width, stride))
            << target << ": width " << width << ", rows " << rows;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < width; ++i) {
            for (float bad : kBad) {
              float& at = x[static_cast<size_t>(r * stride + i)];
              at = bad;
              EXPECT_TRUE(any_non_finite(x.data(), rows, width, stride))
                  << target << ": " << bad << " at row " << r << ", column " << i << " of " << rows
                  << " x " << width;
              at = 3e38f;
            }
          }
          x[static_cast<size_t>(r * stride + width)] = kBad[0];  // between rows: not scanned
        }
        EXPECT_FALSE(any_non_finite(x.data(), rows, width, stride))
            << target << ": width " << width << ", rows " << rows
            << ": the gaps between rows were read";
      }
    }
  });
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
