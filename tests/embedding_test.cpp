// Embeddings: the sinusoidal formula at known points, odd widths, token and position tables
// with their gradients, the errors.
#include "attn/embedding.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "attn/random.hpp"
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

TEST(TokenEmbedding, LooksUpRowsForSequencesAndBatches) {
  TokenEmbedding e(10, 4, 3);
  const std::vector<int64_t> ids = {7, 0, 7, 9, 2, 2};
  const Tensor x = e.forward(ids);
  ASSERT_EQ(x.shape(), (Shape{6, 4}));
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(x.at({i, c}), e.weight.at({ids[static_cast<size_t>(i)], c}));
  }
  const Tensor xb = e.forward(ids, 2);
  ASSERT_EQ(xb.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(xb.at({1, 0, 3}), e.weight.at({9, 3}));
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        e.forward(std::vector<int64_t>{1, 10});
      },
      "id 10 at position 1 outside [0, 10)"));
  EXPECT_TRUE(testing::ThrowsWith([&] { e.forward(std::vector<int64_t>{-1}); }, "id -1"));
  EXPECT_TRUE(
      testing::ThrowsWith([&] { e.forward(ids, 4); }, "6 ids do not split into a batch of 4"));
}

TEST(TokenEmbedding, BackwardSumsTheRowsOfRepeatedIds) {
  TokenEmbedding e(5, 3, 1);
  const std::vector<int64_t> ids = {4, 1, 4, 4};
  const Tensor d_out = rand_normal({2, 2, 3}, 2);
  e.backward(ids, d_out);
  e.backward(ids, d_out);  // accumulates
  for (int64_t c = 0; c < 3; ++c) {
    const float four = d_out.at({0, 0, c}) + d_out.at({1, 0, c}) + d_out.at({1, 1, c});
    EXPECT_FLOAT_EQ(e.grad.at({4, c}), 2 * four);
    EXPECT_FLOAT_EQ(e.grad.at({1, c}), 2 * d_out.at({0, 1, c}));
    EXPECT_EQ(e.grad.at({0, c}), 0.0f);
  }
  e.zero_grad();
  EXPECT_EQ(e.grad.at({4, 0}), 0.0f);
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        e.backward(ids, rand_normal({3, 3}, 3));
      },
      "4 ids but d_out holds 3 rows"));
}

TEST(PositionalEncoding, IsTheSinusoidalTableWithALengthLimit) {
  const PositionalEncoding pe(50, 7);  // odd width
  EXPECT_TRUE(testing::BitwiseEqual(pe.forward(50), sinusoidal_encoding(50, 7)));
  EXPECT_EQ(pe.forward(3).shape(), (Shape{3, 7}));
  EXPECT_NEAR(pe.forward(50).at({49, 6}), std::sin(49.0 / std::pow(10000.0, 6.0 / 7)), 1e-6);
  EXPECT_TRUE(testing::ThrowsWith([&] { pe.forward(51); }, "length 51 outside [1, max_len = 50]"));
  const Tensor x = rand_normal({2, 4, 7}, 1);
  EXPECT_TRUE(testing::BitwiseEqual(pe.add_to(x), add_positional(x, pe.table())));
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        pe.add_to(rand_normal({60, 7}, 1));
      },
      "exceeds max_len 50"));
}

TEST(LearnedPositionalEmbedding, AddsRowsAndSumsTheirGradientOverTheBatch) {
  LearnedPositionalEmbedding p(8, 3, 4);
  const Tensor x = rand_normal({2, 5, 3}, 5);
  const Tensor y = p.forward(x);
  EXPECT_FLOAT_EQ(y.at({1, 4, 2}), x.at({1, 4, 2}) + p.weight.at({4, 2}));
  const Tensor d_out = rand_normal({2, 5, 3}, 6);
  p.backward(d_out);
  EXPECT_FLOAT_EQ(p.grad.at({4, 2}), d_out.at({0, 4, 2}) + d_out.at({1, 4, 2}));
  EXPECT_EQ(p.grad.at({5, 0}), 0.0f);  // positions past T get nothing
  EXPECT_TRUE(testing::ThrowsWith([&] { p.forward(rand_normal({9, 3}, 1)); }, "exceeds max_len 8"));
}

}  // namespace
}  // namespace attn
