// MultiHeadAttention::backward against PyTorch autograd (fixtures written by
// tests/fixtures/make_backward_fixtures.py, committed), plus causality of the gradients,
// thread independence and bad input.
#include <gtest/gtest.h>

#include <string>

#include "attn/embedding.hpp"
#include "attn/io.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/threads.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::BitwiseEqual;
using testing::ThrowsWith;

Tensor fixture(const std::string& name, const std::string& array) {
  return read_npy(std::string(ATTN_FIXTURES_DIR) + "/" + name + "/" + array + ".npy").values;
}

// float32 against PyTorch's float64: max |a − b| ≤ 1e-4 · max |torch|, worst element reported.
::testing::AssertionResult MatchesTorch(const Tensor& a, const Tensor& b, const std::string& what) {
  return testing::RelativelyClose(a, b, 1e-4, what);
}

// Builds the fixture's layer, runs forward and backward, compares everything PyTorch wrote.
void ExpectMatchesTorch(const std::string& name, int64_t heads, int64_t kv_heads, bool rope,
                        Dtype precision = Dtype::kFloat32) {
  SCOPED_TRACE(name);
  const Tensor x = fixture(name, "x");
  MhaConfig config;
  config.precision = precision;
  config.d_model = x.dim(2);
  config.n_heads = heads;
  config.n_kv_heads = kv_heads;
  config.bias = true;
  config.rope = rope;
  MultiHeadAttention layer(config);
  layer.wqkv = fixture(name, "wqkv");
  layer.bqkv = fixture(name, "bqkv");
  layer.wo = fixture(name, "wo");
  layer.bo = fixture(name, "bo");

  MhaActivations saved;
  SdpaOptions options;
  options.causal = true;
  const Tensor y = layer.forward(x, options, saved);
  const MhaGradients g = layer.backward(saved, fixture(name, "d_y"));
  if (precision == Dtype::kBFloat16) {
    // Operands rounded to 8 mantissa bits (relative error ≤ 2⁻⁹ each), sums in float: a few
    // 2⁻⁹ of the largest value; and the rounding must show (far above float's 1e-4).
    EXPECT_TRUE(testing::RelativelyClose(y, fixture(name, "y"), 2e-2, "y"));
    EXPECT_TRUE(testing::RelativelyClose(g.dx, fixture(name, "dx"), 2e-2, "dx"));
    EXPECT_TRUE(testing::RelativelyClose(g.dwqkv, fixture(name, "dwqkv"), 2e-2, "dwqkv"));
    EXPECT_TRUE(testing::RelativelyClose(g.dwo, fixture(name, "dwo"), 2e-2, "dwo"));
    EXPECT_FALSE(MatchesTorch(y, fixture(name, "y"), "y"));
    return;
  }
  EXPECT_TRUE(MatchesTorch(y, fixture(name, "y"), "y"));
  EXPECT_TRUE(MatchesTorch(g.dx, fixture(name, "dx"), "dx"));
  EXPECT_TRUE(MatchesTorch(g.dwqkv, fixture(name, "dwqkv"), "dwqkv"));
  EXPECT_TRUE(MatchesTorch(g.dbqkv, fixture(name, "dbqkv"), "dbqkv"));
  EXPECT_TRUE(MatchesTorch(g.dwo, fixture(name, "dwo"), "dwo"));
  EXPECT_TRUE(MatchesTorch(g.dbo, fixture(name, "dbo"), "dbo"));
}

TEST(MhaBackward, MatchesPyTorchAutograd) {
  ExpectMatchesTorch("mha_backward_causal", 2, 2, false);
}

TEST(MhaBackward, MatchesPyTorchAutogradWithGroupedQueriesAndRope) {
  // T = 70 crosses the kernels' 64-query block.
  ExpectMatchesTorch("mha_backward_gqa_rope", 4, 2, true);
}

MultiHeadAttention make_layer(bool rope, bool bias) {
  MhaConfig config;
  config.d_model = 32;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.rope = rope;
  config.bias = bias;
  config.seed = 5;
  return MultiHeadAttention(config);
}

TEST(MhaBackward, Bf16ProductsStayWithinTheirRoundingOfPyTorch) {
  ExpectMatchesTorch("mha_backward_causal", 2, 2, false, Dtype::kBFloat16);
  ExpectMatchesTorch("mha_backward_gqa_rope", 4, 2, true, Dtype::kBFloat16);
}

TEST(MhaBackward, AGradientAtPositionTNeverReachesLaterInputs) {
  // L depends on outputs 0..29 only; a causal layer's outputs there do not depend on inputs
  // 30.., so their gradient is exactly zero.
  const MultiHeadAttention layer = make_layer(true, true);
  const Tensor x = rand_normal({2, 50, 32}, 1);
  Tensor d_y = rand_normal({2, 50, 32}, 2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 30; t < 50; ++t)
      for (int64_t c = 0; c < 32; ++c) d_y.at({b, t, c}) = 0.0f;
  MhaActivations saved;
  layer.forward(x, testing::causal(), saved);
  const MhaGradients g = layer.backward(saved, d_y);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < 50; ++t) {
      double norm = 0.0;
      for (int64_t c = 0; c < 32; ++c) norm += std::fabs(g.dx.at({b, t, c}));
      if (t >= 30) {
        EXPECT_EQ(norm, 0.0) << "batch " << b << " position " << t;
      } else {
        EXPECT_GT(norm, 0.0) << "batch " << b << " position " << t;
      }
    }
  }
}

TEST(MhaBackward, WithoutBiasesTheirGradientsAreUndefined) {
  const MultiHeadAttention layer = make_layer(false, false);
  MhaActivations saved;
  layer.forward(rand_normal({1, 9, 32}, 3), testing::causal(), saved);
  const MhaGradients g = layer.backward(saved, rand_normal({1, 9, 32}, 4));
  EXPECT_FALSE(g.dbqkv.defined());
  EXPECT_FALSE(g.dbo.defined());
  EXPECT_EQ(g.dwqkv.shape(), layer.wqkv.shape());
  EXPECT_EQ(g.dwo.shape(), layer.wo.shape());
}

TEST(MhaBackward, ResultsDoNotDependOnTheThreadCount) {
  const MultiHeadAttention layer = make_layer(true, true);
  const Tensor x = rand_normal({3, 130, 32}, 5), d_y = rand_normal({3, 130, 32}, 6);
  MhaGradients runs[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    MhaActivations saved;
    layer.forward(x, testing::causal(), saved);
    runs[threads - 1] = layer.backward(saved, d_y);
  }
  set_num_threads(0);
  EXPECT_TRUE(BitwiseEqual(runs[0].dx, runs[1].dx));
  EXPECT_TRUE(BitwiseEqual(runs[0].dwqkv, runs[1].dwqkv));
  EXPECT_TRUE(BitwiseEqual(runs[0].dwo, runs[1].dwo));
}

TEST(MhaBackward, RejectsMismatchedInput) {
  const MultiHeadAttention layer = make_layer(false, true);
  MhaActivations saved;
  layer.forward(rand_normal({1, 9, 32}, 3), testing::causal(), saved);
  EXPECT_TRUE(ThrowsWith(
      [&] {
        layer.backward(saved, rand_normal({1, 8, 32}, 4));
      },
      "d_y must be (1, 9, 32), got (1, 8, 32)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        layer.backward(MhaActivations{}, rand_normal({1, 9, 32}, 4));
      },
      "`saved` must come from forward(x, options, saved) on this layer"));
  const MultiHeadAttention wider(MhaConfig{64, 4, 4, false, false, 10000.0f, 0});
  EXPECT_TRUE(ThrowsWith(
      [&] {
        wider.backward(saved, rand_normal({1, 9, 64}, 4));
      },
      "`saved` must come from"));
}

TEST(MultiHeadAttention, RejectsWeightsOfTheWrongShape) {
  MultiHeadAttention layer = make_layer(true, false);
  const Tensor x = rand_normal({1, 5, 32}, 3);
  layer.wo = rand_normal({32, 31}, 4);
  EXPECT_TRUE(ThrowsWith([&] { layer.forward(x); },
                         "MultiHeadAttention: wo must be (32, 32), got (32, 31)"));
  layer = make_layer(true, false);
  layer.bqkv = Tensor({63});
  EXPECT_TRUE(ThrowsWith([&] { layer.forward(x); }, "bqkv must be (64), got (63)"));
}

TEST(RopeInverse, UndoesTheRotation) {
  const Tensor x = rand_normal({2, 3, 11, 8}, 7);
  Tensor y = x.clone();
  apply_rope(y, 5);
  apply_rope_inverse(y, 5);
  EXPECT_TRUE(testing::AllClose(y, x, 1e-5));
}

}  // namespace
}  // namespace attn
