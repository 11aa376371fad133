// Multi-head attention: head split/merge as views, the per-head form equal to the fused-matrix
// form, causal invariance through the projections, and the argument errors.
#include "attn/mha.hpp"

#include <gtest/gtest.h>

#include "attn/io.hpp"
#include "attn/random.hpp"
#include "attn/reference_matmul.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::AllClose;
using testing::BitwiseEqual;
using testing::causal;
using testing::ThrowsWith;

TEST(SplitHeads, IsAViewWithHeadMajorLayout) {
  const Tensor x = rand_normal({2, 5, 12}, 1);
  const Tensor h = split_heads(x, 3);
  EXPECT_EQ(h.shape(), (Shape{2, 3, 5, 4}));
  EXPECT_TRUE(h.shares_storage(x));
  // Head 2, position 4, feature 1 is feature 2·4 + 1 of position 4.
  EXPECT_EQ(h.at({1, 2, 4, 1}), x.at({1, 4, 9}));
  EXPECT_TRUE(BitwiseEqual(merge_heads(h), x));
  const Tensor unbatched = rand_normal({5, 12}, 2);
  EXPECT_EQ(split_heads(unbatched, 4).shape(), (Shape{4, 5, 3}));
  EXPECT_TRUE(BitwiseEqual(merge_heads(split_heads(unbatched, 4)), unbatched));
}

TEST(SplitHeads, Errors) {
  EXPECT_TRUE(ThrowsWith(
      [] {
        split_heads(Tensor({2, 3, 10}), 4);
      },
      "d_model (10) must divide by n_heads (4)"));
  EXPECT_TRUE(ThrowsWith([] { split_heads(Tensor({2, 3, 8}), 0); }, "n_heads (0) must be >= 1"));
  EXPECT_TRUE(ThrowsWith([] { split_heads(Tensor({8}), 2); },
                         "x must be (B, T, d_model) or (T, d_model), got (8)"));
  EXPECT_TRUE(ThrowsWith([] { merge_heads(Tensor({8, 2})); }, "merge_heads: x must be"));
}

struct Weights {
  Tensor wq, wk, wv, wo;
};

Weights make_weights(int64_t d_model, int64_t d_out, uint64_t seed) {
  return {rand_normal({d_model, d_model}, seed, 0, 0.3f),
          rand_normal({d_model, d_model}, seed + 1, 0, 0.3f),
          rand_normal({d_model, d_model}, seed + 2, 0, 0.3f),
          rand_normal({d_model, d_out}, seed + 3, 0, 0.3f)};
}

// Columns [h·d_head, (h+1)·d_head) of w.
Tensor column_block(const Tensor& w, int64_t h, int64_t d_head) {
  return w.transpose(0, 1).slice(h * d_head, d_head).transpose(0, 1).contiguous();
}

TEST(MultiHeadAttention, PerHeadFormEqualsColumnBlocksOfTheFullMatrices) {
  for (const bool with_wo : {true, false}) {
    const Tensor x = rand_normal({2, 6, 12}, 3);
    const Weights w = make_weights(12, 7, 4);
    const Tensor wo = with_wo ? w.wo : Tensor{};
    std::vector<HeadProjections> heads;
    for (int64_t h = 0; h < 3; ++h) {
      heads.push_back(
          {column_block(w.wq, h, 4), column_block(w.wk, h, 4), column_block(w.wv, h, 4)});
    }
    const MhaResult full = reference::multi_head_attention(x, w.wq, w.wk, w.wv, wo, 3, causal());
    const MhaResult per_head = reference::multi_head_attention_per_head(x, heads, wo, causal());
    EXPECT_TRUE(AllClose(full.output, per_head.output, 1e-6));
    EXPECT_TRUE(AllClose(full.weights, per_head.weights, 1e-6));
    EXPECT_EQ(full.output.shape(), (Shape{2, 6, with_wo ? 7 : 12}));
    EXPECT_EQ(full.weights.shape(), (Shape{2, 3, 6, 6}));
  }
}

TEST(MultiHeadAttention, FollowsTheTextbookSteps) {
  const Tensor x = rand_normal({6, 8}, 5);
  const Weights w = make_weights(8, 8, 6);
  const MhaResult r = reference::multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 2, causal());
  const SdpaResult heads = reference::sdpa(split_heads(reference::linear(x, w.wq), 2),
                                           split_heads(reference::linear(x, w.wk), 2),
                                           split_heads(reference::linear(x, w.wv), 2), causal());
  EXPECT_TRUE(BitwiseEqual(r.output, reference::linear(merge_heads(heads.output), w.wo)));
  EXPECT_TRUE(BitwiseEqual(r.weights, heads.weights));
}

TEST(MultiHeadAttention, FastPathMatchesTheReference) {
  for (const bool batched : {true, false}) {
    for (const bool with_wo : {true, false}) {
      const Tensor x = batched ? rand_normal({2, 70, 32}, 11) : rand_normal({70, 32}, 11);
      const Weights w = make_weights(32, 24, 12);
      const Tensor wo = with_wo ? w.wo : Tensor{};
      SdpaOptions o = causal();
      o.return_weights = true;
      const MhaResult fast = multi_head_attention(x, w.wq, w.wk, w.wv, wo, 4, o);
      const MhaResult ref = reference::multi_head_attention(x, w.wq, w.wk, w.wv, wo, 4, o);
      EXPECT_TRUE(AllClose(fast.output, ref.output, 1e-5)) << batched << with_wo;
      EXPECT_TRUE(AllClose(fast.weights, ref.weights, 1e-5)) << batched << with_wo;
    }
  }
  const Tensor x = rand_normal({1, 5, 8}, 13);
  const Weights w = make_weights(8, 8, 14);
  EXPECT_FALSE(multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 2).weights.defined());
}

// The layer object's weights: its own forward's queries and keys (biases, RoPE, GQA) through
// reference::sdpa equal the reference form's weights built from the same column blocks.
TEST(MultiHeadAttention, LayerWeightsEqualTheReferenceOfTheSameProjections) {
  MhaConfig config;
  config.d_model = 16;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.bias = true;
  config.rope = true;
  config.seed = 5;
  MultiHeadAttention layer(config);
  layer.bqkv.copy_from(rand_normal({layer.bqkv.numel()}, 6));
  const Tensor x = rand_normal({2, 7, 16}, 7);
  const Tensor weights = layer.attention_weights(x, causal());
  const int64_t q_cols = 16, kv_cols = 8, width = q_cols + 2 * kv_cols;
  auto columns = [&](const Tensor& t, int64_t first, int64_t count) {
    return t.rank() == 2 ? t.as_strided({16, count}, {width, 1}, first)
                         : t.as_strided({count}, {1}, first);
  };
  MhaExtras extras;
  extras.n_kv_heads = 2;
  extras.rope = true;
  extras.bq = columns(layer.bqkv, 0, q_cols);
  extras.bk = columns(layer.bqkv, q_cols, kv_cols);
  extras.bv = columns(layer.bqkv, q_cols + kv_cols, kv_cols);
  SdpaOptions o = causal();
  const MhaResult ref = reference::multi_head_attention(
      x, columns(layer.wqkv, 0, q_cols), columns(layer.wqkv, q_cols, kv_cols),
      columns(layer.wqkv, q_cols + kv_cols, kv_cols), layer.wo, 4, o, extras);
  ASSERT_EQ(weights.shape(), (Shape{2, 4, 7, 7}));
  EXPECT_TRUE(AllClose(weights, ref.weights, 1e-5));
  EXPECT_EQ(weights.at({1, 3, 2, 5}), 0.0f);  // above the diagonal
}

TEST(MultiHeadAttention, CausalInvarianceIsBitwise) {
  const Tensor x = rand_normal({3, 9, 16}, 7);
  const Weights w = make_weights(16, 16, 8);
  const Tensor before = multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 4, causal()).output;
  for (int64_t t = 0; t < 9; ++t) {
    Tensor changed = x.clone();
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t p = t + 1; p < 9; ++p)
        for (int64_t c = 0; c < 16; ++c)
          changed.at({b, p, c}) = -changed.at({b, p, c}) * 2.0f + 1.0f;
    const Tensor after = multi_head_attention(changed, w.wq, w.wk, w.wv, w.wo, 4, causal()).output;
    for (int64_t b = 0; b < 3; ++b) {
      EXPECT_TRUE(BitwiseEqual(before.select(b).slice(0, t + 1), after.select(b).slice(0, t + 1)))
          << "t = " << t;
    }
  }
}

// d_model 2^62 used to reach the weights' shapes through a product that wrapped (undefined
// behaviour, and a negative shape in the message); now refused first, naming the size.
TEST(MultiHeadAttentionLayer, AWidthWhoseWeightsWouldWrapIsRefused) {
  for (const int64_t d : {int64_t{1} << 62, int64_t{1} << 32, int64_t{1} << 21}) {
    MhaConfig c;
    c.d_model = d;
    c.n_heads = 1;
    EXPECT_TRUE(
        ThrowsWith([&] { MultiHeadAttention{c}; }, "MultiHeadAttention: d_model² is too large"))
        << d;
  }
}

TEST(MultiHeadAttention, Errors) {
  const Weights w = make_weights(8, 8, 9);
  const Tensor x = rand_normal({2, 3, 8}, 10);
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 3); },
                         "d_model (8) must divide by n_heads (3)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        multi_head_attention(x, Tensor({8, 4}), w.wk, w.wv, w.wo, 2);
      },
      "wq must be (d_model, d_model) = (8, 8), got (8, 4)"));
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, Tensor{}, w.wo, 2); },
                         "wv must be (d_model, n_kv_heads·d_head) = (8, 8), got undefined"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        multi_head_attention(x, w.wq, w.wk, w.wv, Tensor({4, 8}), 2);
      },
      "wo must be (8, d_out), got (4, 8)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        multi_head_attention(Tensor({1, 2, 3, 8}), w.wq, w.wk, w.wv, w.wo, 2);
      },
      "x must be (B, T, d_model) or (T, d_model), got (1, 2, 3, 8)"));
  EXPECT_TRUE(ThrowsWith([&] { reference::multi_head_attention_per_head(x, {}, Tensor{}); },
                         "needs at least one head"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::multi_head_attention_per_head(
            x, {{Tensor({8, 4}), Tensor({8, 4}), Tensor({8, 3})}}, Tensor{});
      },
      "head 0 projections must be (8, 4), got (8, 3)"));
}

// The extras (GQA, biases, RoPE) against PyTorch: tests/fixtures/mha_backward_gqa_rope is a
// layer with [Wq | Wk | Wv] packed, 4 query heads on 2 K/V heads, biases and RoPE; its column
// blocks are the separate matrices multi_head_attention takes.
TEST(MultiHeadAttention, ExtrasMatchPyTorchOnBothPaths) {
  auto fixture = [](const char* array) {
    return read_npy(std::string(ATTN_FIXTURES_DIR) + "/mha_backward_gqa_rope/" + array + ".npy")
        .values;
  };
  const Tensor x = fixture("x"), wqkv = fixture("wqkv"), bqkv = fixture("bqkv");
  const int64_t d = 32, kv = 16;  // d_model; 2 K/V heads of 8
  const Tensor wq = wqkv.as_strided({d, d}, {d + 2 * kv, 1}, 0).contiguous();
  const Tensor wk = wqkv.as_strided({d, kv}, {d + 2 * kv, 1}, d).contiguous();
  const Tensor wv = wqkv.as_strided({d, kv}, {d + 2 * kv, 1}, d + kv).contiguous();
  MhaExtras extras;
  extras.n_kv_heads = 2;
  extras.bq = bqkv.slice(0, d).contiguous();
  extras.bk = bqkv.as_strided({kv}, {1}, d).contiguous();
  extras.bv = bqkv.as_strided({kv}, {1}, d + kv).contiguous();
  extras.bo = fixture("bo");
  extras.rope = true;
  SdpaOptions options;
  options.causal = true;
  const Tensor torch_y = fixture("y");
  const Tensor fast = multi_head_attention(x, wq, wk, wv, fixture("wo"), 4, options, extras).output;
  const Tensor ref =
      reference::multi_head_attention(x, wq, wk, wv, fixture("wo"), 4, options, extras).output;
  EXPECT_TRUE(testing::RelativelyClose(fast, torch_y, 1e-4, "fast"));
  EXPECT_TRUE(testing::RelativelyClose(ref, torch_y, 1e-4, "reference"));
  // Without them it is another function.
  EXPECT_FALSE(testing::RelativelyClose(
      multi_head_attention(x, wq, wq, wq, fixture("wo"), 4, options).output, torch_y, 1e-2, "-"));
}

TEST(MultiHeadAttention, ExtrasAreChecked) {
  const Weights w = make_weights(8, 8, 9);
  const Tensor x = rand_normal({2, 3, 8}, 10);
  MhaExtras gqa;
  gqa.n_kv_heads = 3;
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 4, {}, gqa); },
                         "n_kv_heads (3) must divide n_heads (4)"));
  gqa.n_kv_heads = 2;  // wk and wv must then be (8, 4)
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 4, {}, gqa); },
                         "wk must be (d_model, n_kv_heads·d_head) = (8, 4), got (8, 8)"));
  MhaExtras bias;
  bias.bk = Tensor({7});
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 2, {}, bias); },
                         "bk must be (8), got (7)"));
  MhaExtras bo;
  bo.bo = Tensor({8});
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, w.wv, Tensor{}, 2, {}, bo); },
                         "bo needs wo"));
  MhaExtras rope;
  rope.rope = true;
  EXPECT_TRUE(ThrowsWith([&] { multi_head_attention(x, w.wq, w.wk, w.wv, w.wo, 8, {}, rope); },
                         "rope needs an even d_head, got 1"));
}

TEST(Linear, MatchesHandComputedProduct) {
  const Tensor x = Tensor::from_values({1, 2, 2}, {1, 2, 3, 4});
  const Tensor w = Tensor::from_values({2, 3}, {1, 0, 2, 0, 1, 3});
  EXPECT_EQ(reference::linear(x, w).to_vector(), (std::vector<float>{1, 2, 8, 3, 4, 18}));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::linear(x, Tensor({3, 3}));
      },
      "has d_in 2 but weight (3, 3) expects 3"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        reference::matmul(Tensor({2, 3}), Tensor({2, 3}));
      },
      "inner dims differ"));
}

}  // namespace
}  // namespace attn
