// Reference sdpa: known answers, each mask kind, bottom-right causal, GQA, strided views,
// thread-count independence, and every argument error.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/threads.hpp"
#include "attn/walkthrough.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::AllClose;
using testing::BitwiseEqual;
using testing::ThrowsWith;

using testing::kInf;

TEST(SdpaReference, MatchingQueryIsDominatedByItsKey) {
  const MatchingKeyExample e = matching_key_example();
  const SdpaResult r = reference::sdpa(e.q, e.k, e.v);
  // 1 / (1 + 3e^-2.5 + e^-10), computed by hand.
  const double w2 = 1.0 / (1.0 + 3.0 * std::exp(-2.5) + std::exp(-10.0));
  EXPECT_NEAR(r.weights.at({0, 2}), w2, 1e-6);
  EXPECT_NEAR(r.weights.at({0, 2}), 0.8024, 5e-5);
  const double others = std::exp(-2.5) * w2;
  EXPECT_NEAR(r.output.at({0, 0}), w2 * 99 + others * (1 + 4 + 5) + std::exp(-10.0) * w2 * 2, 1e-4);
  EXPECT_NEAR(r.output.at({0, 0}), 80.10, 0.01);
}

TEST(SdpaReference, IdenticalKeysAverageTheValues) {
  const Tensor q = rand_normal({3, 4}, 1);
  const Tensor k = Tensor::full({5, 4}, 0.5f);
  const Tensor v = rand_normal({5, 2}, 2);
  const SdpaResult r = reference::sdpa(q, k, v);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t c = 0; c < 2; ++c) {
      double mean = 0;
      for (int64_t j = 0; j < 5; ++j) mean += v.at({j, c}) / 5.0;
      EXPECT_NEAR(r.output.at({i, c}), mean, 1e-6);
    }
  }
}

TEST(SdpaReference, ScaleOptionReplacesOneOverRootD) {
  const Tensor q = rand_normal({2, 4}, 3), k = rand_normal({3, 4}, 4), v = rand_normal({3, 4}, 5);
  SdpaOptions half;
  half.scale = 0.5f;  // 1/√4: the default
  EXPECT_TRUE(BitwiseEqual(reference::sdpa(q, k, v, half).output, reference::sdpa(q, k, v).output));
  SdpaOptions zero;
  zero.scale = 0.0f;  // every score 0: uniform weights
  EXPECT_NEAR(reference::sdpa(q, k, v, zero).weights.at({1, 2}), 1.0 / 3.0, 1e-7);
}

TEST(SdpaReference, CausalSquareHasZerosAboveTheDiagonal) {
  const Tensor x = rand_normal({6, 8}, 6);
  const SdpaResult r = reference::sdpa(x, x, x, testing::causal());
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      if (j > i)
        EXPECT_EQ(r.weights.at({i, j}), 0.0f);
      else
        EXPECT_GT(r.weights.at({i, j}), 0.0f);
    }
  }
  EXPECT_FLOAT_EQ(r.weights.at({0, 0}), 1.0f);
}

TEST(SdpaReference, CausalIsBottomRightAlignedWhenTqIsSmaller) {
  // 2 new queries over 5 keys: query 0 sits at position 3, query 1 at position 4.
  const Tensor q = rand_normal({2, 4}, 7), k = rand_normal({5, 4}, 8), v = rand_normal({5, 3}, 9);
  const SdpaResult r = reference::sdpa(q, k, v, testing::causal());
  EXPECT_EQ(r.weights.at({0, 4}), 0.0f);
  EXPECT_GT(r.weights.at({0, 3}), 0.0f);
  EXPECT_GT(r.weights.at({1, 4}), 0.0f);
  // The same as an explicit bottom-right mask.
  SdpaOptions explicit_mask;
  explicit_mask.mask = Mask::allow(causal_mask(2, 5));
  EXPECT_TRUE(BitwiseEqual(r.output, reference::sdpa(q, k, v, explicit_mask).output));
}

TEST(SdpaReference, RowsThatSeeNoKeyAreZeroNotNaN) {
  // Tq > Tk: the first Tq − Tk queries sit before every key.
  const Tensor q = rand_normal({5, 4}, 10), k = rand_normal({2, 4}, 11),
               v = rand_normal({2, 3}, 12);
  const SdpaResult r = reference::sdpa(q, k, v, testing::causal());
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(r.weights.at({i, j}), 0.0f);
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(r.output.at({i, c}), 0.0f);
  }
  EXPECT_FLOAT_EQ(r.weights.at({3, 0}), 1.0f);
  // An explicit mask that forbids everything in a row, boolean or additive.
  Tensor allow = Tensor::full({5, 2}, 1.0f);
  allow.at({1, 0}) = allow.at({1, 1}) = 0.0f;
  SdpaOptions o;
  o.mask = Mask::allow(allow);
  const SdpaResult masked = reference::sdpa(q, k, v, o);
  EXPECT_EQ(masked.output.at({1, 0}), 0.0f);
  EXPECT_FALSE(std::isnan(masked.output.at({1, 2})));
}

TEST(SdpaReference, SlidingWindowKeepsTheLastWKeys) {
  const Tensor x = rand_normal({6, 4}, 13);
  SdpaOptions o;
  o.window = 2;
  const SdpaResult r = reference::sdpa(x, x, x, o);
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      const bool visible = j <= i && j > i - 2;
      EXPECT_EQ(r.weights.at({i, j}) > 0.0f, visible) << i << "," << j;
    }
  }
}

TEST(SdpaReference, BooleanMaskEqualsAdditiveMinusInfinity) {
  const Tensor q = rand_normal({2, 3, 4, 8}, 14), k = rand_normal({2, 3, 6, 8}, 15),
               v = rand_normal({2, 3, 6, 5}, 16);
  const Tensor allow = rand_uniform({4, 6}, 17);  // broadcast over batch and heads
  Tensor bool_mask({4, 6}), additive({4, 6});
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      const bool ok = allow.at({i, j}) > 0.3f;
      bool_mask.at({i, j}) = ok ? 1.0f : 0.0f;
      additive.at({i, j}) = ok ? 0.0f : -kInf;
    }
  }
  SdpaOptions a, b;
  a.mask = Mask::allow(bool_mask);
  b.mask = Mask::additive(additive);
  EXPECT_TRUE(BitwiseEqual(reference::sdpa(q, k, v, a).output, reference::sdpa(q, k, v, b).output));
}

TEST(SdpaReference, MaskBroadcastsFromAnyTrailingShape) {
  const Tensor q = rand_normal({2, 3, 4, 8}, 18), k = rand_normal({2, 3, 5, 8}, 19),
               v = rand_normal({2, 3, 5, 8}, 20);
  const Tensor per_key = rand_normal({5}, 21);  // a bias per key, rank 1
  Tensor full({2, 3, 4, 5});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 5; ++j) full.at({b, h, i, j}) = per_key.at({j});
  SdpaOptions small, big;
  small.mask = Mask::additive(per_key);
  big.mask = Mask::additive(full);
  EXPECT_TRUE(
      BitwiseEqual(reference::sdpa(q, k, v, small).output, reference::sdpa(q, k, v, big).output));
}

TEST(SdpaReference, AdditiveMaskShiftsScores) {
  // Adding log 3 to key 0's score triples its unnormalised weight.
  const Tensor q = Tensor::full({1, 2}, 0.0f), k = Tensor::full({2, 2}, 0.0f);
  const Tensor v = Tensor::from_values({2, 1}, {1, 0});
  SdpaOptions o;
  o.mask = Mask::additive(Tensor::from_values({2}, {std::log(3.0f), 0.0f}));
  EXPECT_NEAR(reference::sdpa(q, k, v, o).output.at({0, 0}), 0.75, 1e-6);
}

TEST(SdpaReference, GroupedQueryEqualsRepeatedKeyValueHeads) {
  const Tensor q = rand_normal({2, 6, 5, 8}, 22), k = rand_normal({2, 2, 5, 8}, 23),
               v = rand_normal({2, 2, 5, 4}, 24);
  // Query heads 0-2 use K/V head 0, heads 3-5 use K/V head 1.
  Tensor k_rep({2, 6, 5, 8}), v_rep({2, 6, 5, 4});
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 6; ++h) {
      k_rep.select(b).select(h).copy_from(k.select(b).select(h / 3));
      v_rep.select(b).select(h).copy_from(v.select(b).select(h / 3));
    }
  }
  const SdpaOptions o = testing::causal();
  const SdpaResult gqa = reference::sdpa(q, k, v, o), rep = reference::sdpa(q, k_rep, v_rep, o);
  EXPECT_TRUE(BitwiseEqual(gqa.output, rep.output));
  EXPECT_TRUE(BitwiseEqual(gqa.weights, rep.weights));
}

TEST(SdpaReference, StridedViewsGiveTheSameResultAsContiguousCopies) {
  // Q/K/V as (B, T, H, d) memory viewed as (B, H, T, d): the layout of a fused QKV projection.
  const Tensor q_bthd = rand_normal({2, 5, 3, 8}, 25), k_bthd = rand_normal({2, 5, 3, 8}, 26),
               v_bthd = rand_normal({2, 5, 3, 8}, 27);
  const Tensor q = q_bthd.permute({0, 2, 1, 3}), k = k_bthd.permute({0, 2, 1, 3}),
               v = v_bthd.permute({0, 2, 1, 3});
  const SdpaOptions o = testing::causal();
  const SdpaResult views = reference::sdpa(q, k, v, o);
  const SdpaResult copies = reference::sdpa(q.contiguous(), k.contiguous(), v.contiguous(), o);
  EXPECT_TRUE(BitwiseEqual(views.output, copies.output));
  EXPECT_TRUE(BitwiseEqual(views.weights, copies.weights));
}

TEST(SdpaReference, ValueWidthMayDifferFromKeyWidth) {
  const SdpaResult r =
      reference::sdpa(rand_normal({3, 4}, 28), rand_normal({7, 4}, 29), rand_normal({7, 11}, 30));
  EXPECT_EQ(r.output.shape(), (Shape{3, 11}));
  EXPECT_EQ(r.weights.shape(), (Shape{3, 7}));
}

TEST(SdpaReference, ResultsDoNotDependOnTheThreadCount) {
  const Tensor q = rand_normal({3, 4, 9, 16}, 31), k = rand_normal({3, 4, 9, 16}, 32),
               v = rand_normal({3, 4, 9, 16}, 33);
  set_num_threads(1);
  const SdpaResult one = reference::sdpa(q, k, v, testing::causal());
  set_num_threads(2);
  const SdpaResult two = reference::sdpa(q, k, v, testing::causal());
  set_num_threads(0);
  EXPECT_TRUE(BitwiseEqual(one.output, two.output));
}

TEST(SdpaReference, ArgumentErrorsNameTheShapes) {
  const Tensor q = rand_normal({2, 4, 5, 8}, 1);
  const Tensor k = rand_normal({2, 4, 6, 8}, 2), v = rand_normal({2, 4, 6, 8}, 3);
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(q, k.select(0), v); }, "same rank, 2 to 4"));
  EXPECT_TRUE(
      ThrowsWith([&] { reference::sdpa(q.select(0).select(0).select(0), k, v); }, "same rank"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::sdpa(q, rand_normal({2, 4, 6, 7}, 4), v);
      },
      "k's last dim (7) must equal q's (8)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::sdpa(q, k, rand_normal({2, 4, 5, 8}, 5));
      },
      "v's key count (5) must equal k's (6)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::sdpa(q, rand_normal({2, 3, 6, 8}, 6), rand_normal({2, 3, 6, 8}, 7));
      },
      "k/v heads (3) must divide q heads (4)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::sdpa(q, rand_normal({3, 4, 6, 8}, 8), rand_normal({3, 4, 6, 8}, 9));
      },
      "q and k/v leading dim 0 differ: q (2, 4, 5, 8), k (3, 4, 6, 8)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::sdpa(q, k, rand_normal({2, 2, 6, 8}, 10));
      },
      "k and v leading dim 1 differ"));
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(Tensor{}, k, v); }, "must all be given"));

  SdpaOptions bad_mask;
  bad_mask.mask = Mask::allow(Tensor({5, 5}));
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(q, k, v, bad_mask); },
                         "mask (5, 5) does not broadcast to the scores (2, 4, 5, 6)"));
  bad_mask.mask = Mask::allow(Tensor({3, 4, 5, 6}));
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(q, k, v, bad_mask); }, "does not broadcast"));
  bad_mask.mask = Mask::allow(Tensor({1, 1, 5, 6}));
  EXPECT_NO_THROW(reference::sdpa(q, k, v, bad_mask));
  SdpaOptions nan_mask;
  nan_mask.mask = Mask::additive(Tensor::full({6}, std::nanf("")));
  EXPECT_TRUE(
      ThrowsWith([&] { reference::sdpa(q, k, v, nan_mask); }, "finite values or -inf, found nan"));
  nan_mask.mask = Mask::additive(Tensor::full({6}, kInf));
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(q, k, v, nan_mask); }, "found inf"));
  SdpaOptions missing;
  missing.mask.kind = MaskKind::kBoolean;
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(q, k, v, missing); }, "mask tensor is missing"));
  SdpaOptions bad_scale;
  bad_scale.scale = kInf;
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa(q, k, v, bad_scale); }, "scale must be finite"));
  SdpaOptions bad_window;
  bad_window.window = -1;
  EXPECT_TRUE(
      ThrowsWith([&] { reference::sdpa(q, k, v, bad_window); }, "window must be >= 0, got -1"));
  EXPECT_TRUE(ThrowsWith([] { causal_mask(0); }, "sizes must be >= 1"));
}

}  // namespace
}  // namespace attn
