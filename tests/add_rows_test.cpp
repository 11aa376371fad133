// kernels::add_rows against the plain loop, bit for bit, on every SIMD target: row widths
// around the vector widths, one row added to every row (a bias), the output in place of either
// operand or apart, and nothing written between the rows.
#include "src/kernels/add_rows.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "attn/random.hpp"
#include "simd_targets.hpp"

namespace attn::kernels {
namespace add_rows_test {  // its own names: the sanitizer builds compile tests in unity batches

std::vector<float> normal_values(size_t n, uint64_t seed) {
  return rand_normal({static_cast<int64_t>(n)}, seed).to_vector();
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

enum class Into { kA, kB, kApart };

TEST(AddRows, EqualsThePlainLoopOnEveryTarget) {
  testing::for_each_simd_target([](const char* target) {
    for (int64_t cols : {1, 5, 7, 8, 15, 16, 17, 33, 128, 130}) {
      for (int64_t rows : {1, 3}) {
        for (bool bias : {false, true}) {
          for (Into into : {Into::kA, Into::kB, Into::kApart}) {
            if (bias && into == Into::kB) continue;  // a bias row is not an output
            const int64_t ld = cols + 3, ld_b = bias ? 0 : ld;
            const auto n = static_cast<size_t>(rows * ld);
            const std::vector<float> a0 = normal_values(n, 1), b0 = normal_values(n, 2),
                                     out0 = normal_values(n, 3);
            std::vector<float> a = a0, b = b0, out = out0;
            std::vector<float>& target_rows = into == Into::kA ? a : into == Into::kB ? b : out;
            std::vector<float> expected = target_rows;
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t c = 0; c < cols; ++c) {
                expected[static_cast<size_t>(r * ld + c)] =
                    a0[static_cast<size_t>(r * ld + c)] + b0[static_cast<size_t>(r * ld_b + c)];
              }
            }
            add_rows(a.data(), ld, b.data(), ld_b, rows, cols, target_rows.data(), ld);
            EXPECT_TRUE(same_bits(target_rows, expected))
                << target << ": cols " << cols << ", rows " << rows << (bias ? ", bias" : "")
                << ", into " << static_cast<int>(into);
          }
        }
      }
    }
  });
}

}  // namespace add_rows_test
}  // namespace attn::kernels
