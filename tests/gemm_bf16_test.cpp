// Dtype::kBFloat16 (attn/gemm.hpp, src/gemm_bf16.cpp): the operands' rounding to
// bfloat16 against the scalar attn::to_bfloat16, the products against the reference matmul
// of the rounded operands (on oneDNN's bf16 kernel and on the float fallback), that the
// rounding really happens, and thread-count independence.
#include "src/linalg/gemm_bf16.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <span>
#include <tuple>
#include <vector>

#include "attn/gemm.hpp"
#include "attn/kv_cache.hpp"
#include "attn/random.hpp"
#include "attn/reference_matmul.hpp"
#include "attn/threads.hpp"
#include "bf16_engines.hpp"
#include "gemm_cases.hpp"
#include "simd_targets.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/kernels/bfloat16_pack.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

// Values that exercise the rounding: ties both ways, carries into the exponent, large and
// small magnitudes, the infinities and NaN; then random ones.
std::vector<float> rounding_cases() {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          1.0f + 0x1p-8f,
                          1.0f + 0x1p-9f,
                          1.0f + 3 * 0x1p-9f,
                          1.0f + 0x1p-9f + 0x1p-20f,
                          0x1.ffffffp0f,
                          -0x1.ff8p3f,
                          3.4e38f,
                          -1e-30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  const Tensor r = rand_normal({300}, 9);
  for (float v : r.to_vector()) x.push_back(v * 100.0f);
  return x;
}

TEST(Bfloat16, BothKernelsRoundAsTheScalarFunction) {
  const std::vector<float> x = rounding_cases();
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> fast(x.size()), portable(x.size());
  kernels::round_to_bfloat16(x.data(), 1, n, n, fast.data());
  kernels::round_to_bfloat16_portable(x.data(), 1, n, n, portable.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(portable[i], to_bfloat16(x[i])) << "x = " << x[i];
    EXPECT_EQ(fast[i], to_bfloat16(x[i])) << "x = " << x[i];
  }
  // Subnormal inputs: the portable kernel rounds them, AVX-512 BF16 reads them as 0.
  const float tiny = 0x1p-130f;
  uint16_t bits = 1;
  kernels::round_to_bfloat16_portable(&tiny, 1, 1, 1, &bits);
  EXPECT_EQ(bits, to_bfloat16(tiny));
}

TEST(Bfloat16, RoundsABlockOfAStridedMatrix) {
  const Tensor m = rand_normal({7, 40}, 3);  // a (7, 33) block of rows 40 apart
  std::vector<uint16_t> out(7 * 33);
  kernels::round_to_bfloat16(m.data(), 7, 33, 40, out.data());
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t c = 0; c < 33; ++c) ASSERT_EQ(out[r * 33 + c], to_bfloat16(m.at({r, c})));
}

// The AMX kernels' packers round each float to nearest even as they copy it (the forward packs
// K and V from the caller's floats), on every SIMD target, through their vector blocks and their
// tails: 37 rows 40 floats apart, 33 of each row packed, rows and transposed.
TEST(Bfloat16, PackersRoundEveryElementLikeTheScalarFunction) {
  const Tensor m = rand_normal({37, 40}, 4, 0.0f, 3.0f);
  const size_t rows = 37, width = 33, ld_rows = 48, ld_transposed = 40;
  testing::for_each_simd_target([&](const char* target) {
    std::vector<uint16_t> packed(rows * ld_rows, 1), transposed(width * ld_transposed, 1);
    kernels::pack_bfloat16_rows(m.data(), 40, rows, width, ld_rows, packed.data());
    kernels::pack_bfloat16_transposed(m.data(), 40, rows, width, ld_transposed, transposed.data());
    for (size_t t = 0; t < rows; ++t) {
      for (size_t e = 0; e < width; ++e) {
        const uint16_t expected = to_bfloat16(m.data()[t * 40 + e]);
        ASSERT_EQ(packed[t * ld_rows + e], expected) << target << " row " << t << ", " << e;
        ASSERT_EQ(transposed[e * ld_transposed + t], expected) << target << " " << e << ", " << t;
      }
      for (size_t e = width; e < ld_rows; ++e) ASSERT_EQ(packed[t * ld_rows + e], 0) << target;
    }
    for (size_t e = 0; e < width; ++e) {
      for (size_t t = rows; t < ld_transposed; ++t)
        ASSERT_EQ(transposed[e * ld_transposed + t], 0) << target;
    }
  });
}

// x rounded to bfloat16, as a float.
Tensor rounded(const Tensor& x) {
  Tensor out = x.contiguous().clone();
  for (float& v : std::span<float>(out.data(), static_cast<size_t>(out.numel()))) {
    v = from_bfloat16(to_bfloat16(v));
  }
  return out;
}

// Against the float reference of the rounded operands: the sums are float in both, in
// different orders, so to k float roundings of products of size ~1.
void expect_matches_rounded_reference(const char* kernel) {
  testing::for_every_case(
      {{1, 1, 1}, {7, 5, 3}, {130, 70, 33}, {40, 300, 64}},
      [&](testing::Size s, bool ta, bool tb, const Tensor& a, const Tensor& b,
          const std::string& what) {
        const Tensor c0 = rand_normal({s.m, s.n}, 3);
        Tensor c = c0.clone();
        gemm(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), a.dim(1), b.data(), b.dim(1), 2.0f, c.data(),
             s.n, Dtype::kBFloat16);
        const Tensor ra = rounded(a), rb = rounded(b);
        Tensor expected =
            reference::matmul(ta ? ra.transpose(0, 1) : ra, tb ? rb.transpose(0, 1) : rb);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j)
            expected.at({i, j}) = 0.5f * expected.at({i, j}) + 2.0f * c0.at({i, j});
        EXPECT_TRUE(testing::AllClose(c, expected, 2e-6 * static_cast<double>(s.k) + 1e-6))
            << kernel << ": " << what;
      });
}

// check(kernel) on oneDNN's bf16 kernel (where the CPU has one), then on the float fallback.
void on_kernel_and_fallback(const std::function<void(const char*)>& check) {
  const bool has_kernel = detail::use_bf16_fallback_for_test(false);
  check(has_kernel ? "oneDNN bf16 kernel" : "fallback (no bf16 kernel on this CPU)");
  detail::use_bf16_fallback_for_test(true);
  check("float fallback");
  detail::use_bf16_fallback_for_test(false);
}

TEST(GemmBf16, MatchesTheReferenceOfTheRoundedOperands) {
  on_kernel_and_fallback(expect_matches_rounded_reference);
}

TEST(GemmBf16, TheOperandsAreReallyRounded) {
  // 1 + 2^-9 is halfway between two bfloat16 values and rounds to even, 1: in bf16 the
  // product of k such values with ones is k, in float k·(1 + 2^-9).
  const int64_t m = 32, n = 32, k = 64;
  const std::vector<float> a(m * k, 1.0f + 0x1p-9f), b(k * n, 1.0f);
  std::vector<float> c32(m * n), c16(m * n);
  gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c32.data(), n);
  gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c16.data(), n,
       Dtype::kBFloat16);
  EXPECT_FLOAT_EQ(c32[0], 64.0f * (1.0f + 0x1p-9f));
  EXPECT_EQ(c16[0], 64.0f);
  std::vector<float> biased(m * n);
  const std::vector<float> bias(n, 0.25f);
  gemm_bias(false, false, m, n, k, a.data(), k, b.data(), n, bias.data(), biased.data(), n,
            Dtype::kBFloat16);
  EXPECT_EQ(biased[5], 64.25f);
}

TEST(GemmBf16, ResultsDoNotDependOnTheThreadCount) {
  const Tensor x = rand_normal({390, 128}, 1), w = rand_normal({128, 512}, 2),
               dy = rand_normal({390, 512}, 3);
  Tensor runs[2][2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor y({390, 512}), dw({128, 512});
    gemm(false, false, 390, 512, 128, 1.0f, x.data(), 128, w.data(), 512, 0.0f, y.data(), 512,
         Dtype::kBFloat16);
    gemm(true, false, 128, 512, 390, 1.0f, x.data(), 128, dy.data(), 512, 0.0f, dw.data(), 512,
         Dtype::kBFloat16);
    runs[threads - 1][0] = y;
    runs[threads - 1][1] = dw;
  }
  set_num_threads(0);
  EXPECT_TRUE(testing::BitwiseEqual(runs[0][0], runs[1][0]));
  EXPECT_TRUE(testing::BitwiseEqual(runs[0][1], runs[1][1]));
}

// A matrix's bits with its rows `pad` elements apart beyond its width, as a training step keeps
// a tensor rounded once (round_rows_to_bfloat16) for several products.
std::vector<uint16_t> rounded_rows(const Tensor& x, int64_t pad) {
  const int64_t rows = x.dim(0), cols = x.dim(1), ld = cols + pad;
  std::vector<uint16_t> bits(static_cast<size_t>(rows * ld), 0xffff);
  detail::round_rows_to_bfloat16(x.data(), rows, cols, cols, bits.data());
  if (pad == 0) return bits;
  std::vector<uint16_t> apart(bits.size(), 0xffff);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(bits.begin() + r * cols, bits.begin() + (r + 1) * cols, apart.begin() + r * ld);
  return apart;
}

// Operands rounded once and handed over as bits — adjacent rows or rows apart, either operand,
// with a bias or beta — give gemm's bits on the same floats, on oneDNN's bf16 kernel and on the
// float fallback; and round_rows_to_bfloat16 rounds as the scalar function does.
void expect_rounded_operands_give_gemms_bits(const char* kernel) {
  using detail::MatrixOperand;
  testing::for_every_case(
      {{1, 1, 1}, {7, 5, 3}, {130, 70, 33}, {40, 300, 64}, {384, 128, 512}},
      [&](testing::Size s, bool ta, bool tb, const Tensor& a, const Tensor& b,
          const std::string& what) {
        const Tensor c0 = rand_normal({s.m, s.n}, 3), bias = rand_normal({s.n}, 4);
        Tensor expected = c0.clone(), expected_biased({s.m, s.n});
        gemm(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), a.dim(1), b.data(), b.dim(1), 2.0f,
             expected.data(), s.n, Dtype::kBFloat16);
        gemm_bias(ta, tb, s.m, s.n, s.k, a.data(), a.dim(1), b.data(), b.dim(1), bias.data(),
                  expected_biased.data(), s.n, Dtype::kBFloat16);
        for (const int64_t pad : {0, 5}) {
          const std::vector<uint16_t> a_bits = rounded_rows(a, pad), b_bits = rounded_rows(b, pad);
          const MatrixOperand ra = MatrixOperand::of(a_bits.data(), a.dim(1) + pad),
                              rb = MatrixOperand::of(b_bits.data(), b.dim(1) + pad);
          const MatrixOperand fa = MatrixOperand::of(a.data(), a.dim(1)),
                              fb = MatrixOperand::of(b.data(), b.dim(1));
          for (const auto& [x, y, which] :
               {std::tuple{ra, rb, "both rounded"}, std::tuple{ra, fb, "A rounded"},
                std::tuple{fa, rb, "B rounded"}}) {
            Tensor c = c0.clone(), biased({s.m, s.n});
            detail::gemm_bf16(ta, tb, s.m, s.n, s.k, 0.5f, x, y, 2.0f, c.data(), s.n);
            detail::gemm_bf16(ta, tb, s.m, s.n, s.k, 1.0f, x, y, 0.0f, biased.data(), s.n,
                              bias.data());
            EXPECT_TRUE(testing::BitwiseEqual(c, expected))
                << kernel << ": " << what << ", " << which << ", pad " << pad;
            EXPECT_TRUE(testing::BitwiseEqual(biased, expected_biased))
                << kernel << ": " << what << ", " << which << ", pad " << pad << ", bias";
          }
        }
      });
}

TEST(GemmBf16, OperandsRoundedOnceGiveTheBitsOfRoundingInTheProduct) {
  on_kernel_and_fallback(expect_rounded_operands_give_gemms_bits);

  const std::vector<float> cases = rounding_cases();
  const auto half = static_cast<int64_t>(cases.size()) / 2;
  const Tensor strided =
      Tensor::from_values({2, half}, std::vector<float>(cases.begin(), cases.begin() + 2 * half));
  const int64_t cols = strided.dim(1) - 3;  // the rows' first cols elements, ld apart
  std::vector<uint16_t> bits(static_cast<size_t>(2 * cols));
  detail::round_rows_to_bfloat16(strided.data(), 2, cols, strided.dim(1), bits.data());
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t e = 0; e < cols; ++e)
      EXPECT_EQ(bits[static_cast<size_t>(r * cols + e)], to_bfloat16(strided.at({r, e})))
          << r << ", " << e;
}

// Weights kept in bfloat16 (gemm_bf16_weights): the bits attn::gemm gives on B's values as
// floats — one row on the same gemv kernels in the same order, on every SIMD target; more rows
// on sgemm over the same blocks, widened a piece at a time (2100 columns: pieces of 1024 and
// the rest); the bias variant is the product into rows of the bias.
TEST(GemmBf16Weights, EqualsTheFloatProductsOfTheSameValues) {
  // With AMX or a fast vdpbf16ps more rows take a bf16 kernel (below).
  const testing::OnlyBf16Engine widening(testing::Bf16Engine::kVector);
  testing::for_each_simd_target([](const char* target) {
    for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                                  {1, 17, 127},
                                  {1, 64, 129},
                                  {1, 1100, 260},  // three slabs over the threads
                                  {1, 4100, 70},   // past one column piece
                                  {37, 300, 64},
                                  {37, 2100, 64},
                                  {130, 70, 33}}) {
      for (bool tb : {false, true}) {
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          const int64_t ldb = (tb ? k : n) + 3;
          const Tensor a = rand_normal({m, k}, 1);
          const Tensor b = rounded(rand_normal(tb ? Shape{n, ldb} : Shape{k, ldb}, 2));
          std::vector<uint16_t> bits(static_cast<size_t>(b.numel()));
          kernels::round_to_bfloat16(b.data(), 1, b.numel(), b.numel(), bits.data());
          const Tensor bias = rand_normal({n}, 4);
          const Dtype precision = Dtype::kFloat32;
          const std::string what = std::string(target) + " " + std::to_string(m) + "x" +
                                   std::to_string(n) + "x" + std::to_string(k) +
                                   " tb=" + std::to_string(tb) +
                                   " threads=" + std::to_string(threads);
          Tensor expected = rand_normal({m, n}, 3), got = expected.clone();
          gemm(false, tb, m, n, k, 0.5f, a.data(), k, b.data(), ldb, 2.0f, expected.data(), n,
               precision);
          detail::gemm_bf16_weights(tb, m, n, k, 0.5f, a.data(), k, bits.data(), ldb, 2.0f,
                                    got.data(), n);
          EXPECT_TRUE(testing::BitwiseEqual(got, expected)) << what;
          gemm_bias(false, tb, m, n, k, a.data(), k, b.data(), ldb, bias.data(), expected.data(), n,
                    precision);
          detail::gemm_bias_bf16_weights(tb, m, n, k, a.data(), k, bits.data(), ldb, bias.data(),
                                         got.data(), n);
          EXPECT_TRUE(testing::BitwiseEqual(got, expected)) << what << " bias";
        }
      }
    }
  });
  set_num_threads(0);
  uint16_t w = 0;
  float x = 0;
  EXPECT_TRUE(testing::ThrowsWith(
      [&] { detail::gemm_bf16_weights(false, 2, 3, 4, 1.0f, &x, 4, &w, 2, 0.0f, &x, 3); },
      "leading dimensions too small: lda=4 ldb=2"));
}

// With AMX (oneDNN's bf16 kernel) or vdpbf16ps (gemm_dpbf16.hpp), products of more than one
// row round A to bf16 too (design.md): the float product of the rounded A and B's values, to the
// order of its sums — and not the product of the unrounded A. Shapes off the 16-row and
// 16-column tiles and odd reductions; alpha and beta; the bias variant.
TEST(GemmBf16Weights, OnBf16KernelsRoundsTheRowsAsWell) {
  const int engines_run = testing::for_each_fast_bf16_engine([](testing::Bf16Engine engine) {
    for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 300, 64},
                                  {130, 70, 33},
                                  {64, 2100, 96},
                                  {2, 17, 1},
                                  {48, 64, 1100}}) {
      for (bool tb : {false, true}) {
        const int64_t ldb = (tb ? k : n) + 3;
        const Tensor a = rand_normal({m, k}, 1);
        const Tensor b = rounded(rand_normal(tb ? Shape{n, ldb} : Shape{k, ldb}, 2));
        std::vector<uint16_t> bits(static_cast<size_t>(b.numel()));
        kernels::round_to_bfloat16(b.data(), 1, b.numel(), b.numel(), bits.data());
        const Tensor a_rounded = rounded(a), bias = rand_normal({n}, 4);
        const std::string what = testing::param_name(engine) + " " + std::to_string(m) + "x" +
                                 std::to_string(n) + "x" + std::to_string(k) +
                                 " tb=" + std::to_string(tb);
        Tensor expected({m, n}), unrounded({m, n}), got({m, n});
        gemm(false, tb, m, n, k, 1.0f, a_rounded.data(), k, b.data(), ldb, 0.0f, expected.data(),
             n);
        gemm(false, tb, m, n, k, 1.0f, a.data(), k, b.data(), ldb, 0.0f, unrounded.data(), n);
        detail::gemm_bf16_weights(tb, m, n, k, 1.0f, a.data(), k, bits.data(), ldb, 0.0f,
                                  got.data(), n);
        EXPECT_TRUE(testing::RelativelyClose(got, expected, 1e-5, what));
        EXPECT_FALSE(testing::RelativelyClose(got, unrounded, 1e-5, what));
        // C = 0.5·A·B + 2·C, and the bias's rows plus the product.
        expected = rand_normal({m, n}, 3);
        got = expected.clone();
        gemm(false, tb, m, n, k, 0.5f, a_rounded.data(), k, b.data(), ldb, 2.0f, expected.data(),
             n);
        detail::gemm_bf16_weights(tb, m, n, k, 0.5f, a.data(), k, bits.data(), ldb, 2.0f,
                                  got.data(), n);
        EXPECT_TRUE(testing::RelativelyClose(got, expected, 1e-5, what + " alpha, beta"));
        gemm_bias(false, tb, m, n, k, a_rounded.data(), k, b.data(), ldb, bias.data(),
                  expected.data(), n);
        detail::gemm_bias_bf16_weights(tb, m, n, k, a.data(), k, bits.data(), ldb, bias.data(),
                                       got.data(), n);
        EXPECT_TRUE(testing::RelativelyClose(got, expected, 1e-5, what + " bias"));
      }
    }
  });
  if (engines_run == 0)
    GTEST_SKIP() << "this CPU has no bf16 kernel (AMX-BF16 or a fast vdpbf16ps)";
}

}  // namespace
}  // namespace attn
