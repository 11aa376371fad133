// attn::gemm (oneDNN; one-row products on attn's gemv kernels) against the reference matmul:
// transposes, alpha/beta, odd sizes, the threaded splits along either dim or the inner one, and the
// argument errors.
#include "attn/gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "attn/random.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/threads.hpp"
#include "gemm_cases.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::for_every_case;
using testing::Size;

// Tolerance from the problem: k products of values of size ~1, float accumulation.
double tolerance(int64_t k) { return 1e-6 * static_cast<double>(k) + 1e-6; }

// The last size is split over its inner dimension (k at least C's longer side), an odd k.
TEST(Gemm, MatchesTheReferenceForEveryTransposeAndThreadCount) {
  for_every_case(
      {{1, 1, 1}, {7, 5, 3}, {130, 70, 33}, {70, 300, 64}, {257, 129, 200}, {40, 90, 701}},
      [](Size s, bool ta, bool tb, const Tensor& a, const Tensor& b, const std::string& what) {
        const Tensor c0 = rand_normal({s.m, s.n}, 3);
        Tensor c = c0.clone();
        gemm(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), a.dim(1), b.data(), b.dim(1), 2.0f, c.data(),
             s.n);
        const Tensor op_a = ta ? a.transpose(0, 1) : a, op_b = tb ? b.transpose(0, 1) : b;
        Tensor expected = reference::matmul(op_a, op_b);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j)
            expected.at({i, j}) = 0.5f * expected.at({i, j}) + 2.0f * c0.at({i, j});
        EXPECT_TRUE(testing::AllClose(c, expected, tolerance(s.k))) << what;
      });
}

// The split over workers is fixed by the shape and the core count, so 1 and 2 threads compute
// the same blocks (oneDNN rounds differently for different block sizes on some CPUs).
TEST(Gemm, ResultsDoNotDependOnTheThreadCount) {
  // A projection (rows split), a wide product (columns split) and a weight gradient xᵀ·dy
  // (split over its 390-long reduction, where the rounding would differ).
  const Tensor x = rand_normal({390, 32}, 1), w = rand_normal({32, 96}, 2);
  const Tensor wide = rand_normal({32, 390}, 3), dy = rand_normal({390, 96}, 4);
  Tensor runs[2][3];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    runs[threads - 1][0] = matmul(x, w);
    runs[threads - 1][1] = matmul(w.transpose(0, 1), wide);
    runs[threads - 1][2] = matmul(x.transpose(0, 1), dy);
  }
  set_num_threads(0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(testing::BitwiseEqual(runs[0][i], runs[1][i])) << i;
}

// A B whose leading dimension is a multiple of 512 floats is copied into padded scratch before
// oneDNN reads it, for blocks oneDNN would not pack: the columns of the block only (the rest of
// each row holds NaN here), both splits, a block below 32 rows (not copied), 1 and 2 threads,
// and B transposed (never copied) alongside.
TEST(Gemm, WeightsWithALeadingDimensionOf512FloatsGiveTheReference) {
  for (const Size s : {Size{300, 200, 48}, Size{64, 700, 30}, Size{20, 96, 40}}) {
    for (bool tb : {false, true}) {
      const int64_t ldb = 1024, b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
      Tensor b_wide({b_rows, ldb});
      const Tensor b = rand_normal({b_rows, b_cols}, 7), a = rand_normal({s.m, s.k}, 8);
      for (int64_t i = 0; i < b_rows; ++i) {
        for (int64_t j = 0; j < ldb; ++j) {
          b_wide.at({i, j}) = j < b_cols ? b.at({i, j}) : std::nanf("");
        }
      }
      const Tensor expected = reference::matmul(a, tb ? b.transpose(0, 1) : b);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        Tensor c({s.m, s.n});
        gemm(false, tb, s.m, s.n, s.k, 1.0f, a.data(), s.k, b_wide.data(), ldb, 0.0f, c.data(),
             s.n);
        EXPECT_TRUE(testing::AllClose(c, expected, tolerance(s.k)))
            << s.m << "x" << s.n << "x" << s.k << (tb ? " B transposed" : "") << ", " << threads
            << " threads";
      }
      set_num_threads(0);
    }
  }
}

// gemm_bias is gemm (beta = 0) with the bias then added to every row, bit for bit, for both
// splits (rows and columns), transposes, a leading dimension wider than n, and 1 or 2 threads.
TEST(Gemm, BiasVariantEqualsAProductWithTheBiasAddedAfter) {
  for_every_case(
      {{1, 9, 300}, {3, 5, 7}, {200, 70, 33}, {40, 300, 64}},
      [](Size s, bool ta, bool tb, const Tensor& a, const Tensor& b, const std::string& what) {
        const Tensor bias = rand_normal({s.n}, 3);
        const int64_t ldc = s.n + 3;
        Tensor expected({s.m, ldc}), got({s.m, ldc});
        gemm(ta, tb, s.m, s.n, s.k, 1.0f, a.data(), a.dim(1), b.data(), b.dim(1), 0.0f,
             expected.data(), ldc);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) expected.at({i, j}) += bias.at({j});
        gemm_bias(ta, tb, s.m, s.n, s.k, a.data(), a.dim(1), b.data(), b.dim(1), bias.data(),
                  got.data(), ldc);
        EXPECT_TRUE(testing::BitwiseEqual(got, expected)) << what;
      });
  float x = 0;
  EXPECT_TRUE(
      testing::ThrowsWith([&] { gemm_bias(false, false, 2, 3, 4, &x, 3, &x, 3, &x, &x, 3); },
                          "leading dimensions too small: lda=3"));
}

// One row (a generated token) runs the gemv kernels: W read by slabs of rows, or by rows
// when used transposed. Sizes around the slab (128 rows), the column piece (4096), the
// vector width and the four-row step; a leading dimension wider than n; beta 0 over NaN.
TEST(Gemm, OneRowProductsMatchTheReferenceAndDoNotDependOnTheThreadCount) {
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1, 1},
                             {5, 3},
                             {17, 127},
                             {33, 128},
                             {64, 129},
                             {2304, 768},
                             {768, 3072},
                             {4100, 70},
                             {9000, 260}}) {
    for (bool tb : {false, true}) {
      const int64_t ldb = (tb ? k : n) + 3;
      const Tensor x = rand_normal({1, k}, 1),
                   b = rand_normal(tb ? Shape{n, ldb} : Shape{k, ldb}, 2);
      const Tensor c0 = rand_normal({1, n}, 3);
      const Tensor op_b = tb ? b.as_strided({k, n}, {1, ldb}) : b.as_strided({k, n}, {ldb, 1});
      Tensor expected = reference::matmul(x, op_b);
      Tensor overwritten = expected.clone();
      for (int64_t j = 0; j < n; ++j)
        expected.at({0, j}) = 0.5f * expected.at({0, j}) + 2.0f * c0.at({0, j});
      const std::string what =
          "n=" + std::to_string(n) + " k=" + std::to_string(k) + " tb=" + std::to_string(tb);
      Tensor by_threads[2];
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        Tensor c = c0.clone();
        gemm(false, tb, 1, n, k, 0.5f, x.data(), k, b.data(), ldb, 2.0f, c.data(), n);
        EXPECT_TRUE(testing::AllClose(c, expected, tolerance(k))) << what;
        Tensor nan = Tensor::full({1, n}, std::nanf(""));
        gemm(false, tb, 1, n, k, 1.0f, x.data(), k, b.data(), ldb, 0.0f, nan.data(), n);
        EXPECT_TRUE(testing::AllClose(nan, overwritten, tolerance(k))) << what << " beta 0";
        by_threads[threads - 1] = c;
      }
      set_num_threads(0);
      EXPECT_TRUE(testing::BitwiseEqual(by_threads[0], by_threads[1])) << what;
    }
  }
}

TEST(Gemm, MatmulAndLinearTakeViews) {
  const Tensor a = rand_normal({40, 30}, 4), b = rand_normal({50, 40}, 5);
  EXPECT_TRUE(testing::AllClose(matmul(b, a), reference::matmul(b, a), tolerance(40)));
  EXPECT_TRUE(testing::AllClose(matmul(a.transpose(0, 1), b.transpose(0, 1)),
                                reference::matmul(a.transpose(0, 1), b.transpose(0, 1)),
                                tolerance(40)));
  const Tensor x = rand_normal({2, 9, 30}, 6), w = rand_normal({30, 7}, 7);
  EXPECT_TRUE(testing::AllClose(linear(x, w), reference::linear(x, w), tolerance(30)));
  // A view with neither dim contiguous is copied.
  const Tensor every_other = rand_normal({4, 6, 2}, 8).select(0).as_strided({3, 2}, {4, 2});
  EXPECT_TRUE(testing::AllClose(matmul(every_other, a.slice(0, 2)),
                                reference::matmul(every_other, a.slice(0, 2)), tolerance(2)));
}

TEST(Gemm, Errors) {
  float x = 0;
  EXPECT_TRUE(testing::ThrowsWith([&] { gemm(false, false, -1, 1, 1, 1, &x, 1, &x, 1, 0, &x, 1); },
                                  "sizes must be >= 0"));
  EXPECT_TRUE(testing::ThrowsWith([&] { gemm(false, false, 2, 3, 4, 1, &x, 3, &x, 3, 0, &x, 3); },
                                  "leading dimensions too small: lda=3"));
  EXPECT_TRUE(testing::ThrowsWith(
      [] {
        matmul(Tensor({2, 3}), Tensor({2, 3}));
      },
      "inner dims differ"));
  EXPECT_TRUE(testing::ThrowsWith([] { linear(Tensor({2, 3}), Tensor({4, 3})); }, "has d_in 3"));
}

}  // namespace
}  // namespace attn
