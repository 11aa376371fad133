// The oracle: outputs of the textbook numpy formulas (tests/fixtures/make_fixtures.py, run
// once with Debian's numpy, committed) against the C++ reference path. Max abs error ≤ 1e-5.
#include <gtest/gtest.h>

#include <string>

#include "attn/io.hpp"
#include "attn/mha.hpp"
#include "attn/sdpa.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

constexpr double kTolerance = 1e-5;

NpyArray load(const std::string& fixture, const std::string& name) {
  return read_npy(std::string(ATTN_FIXTURES_DIR) + "/" + fixture + "/" + name + ".npy");
}
Tensor tensor(const std::string& fixture, const std::string& name) {
  return load(fixture, name).values;
}

void expect_sdpa_matches(const std::string& fixture, SdpaOptions options) {
  const SdpaResult r =
      reference::sdpa(tensor(fixture, "q"), tensor(fixture, "k"), tensor(fixture, "v"), options);
  EXPECT_TRUE(testing::AllClose(r.output, tensor(fixture, "out"), kTolerance)) << fixture;
  EXPECT_TRUE(testing::AllClose(r.weights, tensor(fixture, "weights"), kTolerance)) << fixture;
}

TEST(Fixtures, SdpaPlain) { expect_sdpa_matches("sdpa_plain", {}); }

TEST(Fixtures, SdpaCausal) {
  SdpaOptions o;
  o.causal = true;
  expect_sdpa_matches("sdpa_causal", o);
}

TEST(Fixtures, SdpaCausalBottomRight) {
  SdpaOptions o;
  o.causal = true;
  expect_sdpa_matches("sdpa_causal_bottom_right", o);
}

TEST(Fixtures, SdpaBooleanMaskWithAFullyMaskedRow) {
  const NpyArray mask = load("sdpa_bool_mask", "mask");
  ASSERT_EQ(mask.dtype, NpyDtype::kBool);
  SdpaOptions o;
  o.mask = Mask::allow(mask.values);
  expect_sdpa_matches("sdpa_bool_mask", o);
}

TEST(Fixtures, SdpaAdditiveMaskAndScale) {
  SdpaOptions o;
  o.mask = Mask::additive(tensor("sdpa_additive_mask", "mask"));
  o.scale = 0.3f;
  expect_sdpa_matches("sdpa_additive_mask", o);
}

TEST(Fixtures, SdpaGroupedQuery) {
  SdpaOptions o;
  o.causal = true;
  expect_sdpa_matches("sdpa_gqa", o);
}

TEST(Fixtures, MultiHeadAttentionCausal) {
  const std::string f = "mha_causal";
  SdpaOptions o;
  o.causal = true;
  const MhaResult r = reference::multi_head_attention(
      tensor(f, "x"), tensor(f, "wq"), tensor(f, "wk"), tensor(f, "wv"), tensor(f, "wo"), 4, o);
  EXPECT_TRUE(testing::AllClose(r.output, tensor(f, "out"), kTolerance));
  EXPECT_TRUE(testing::AllClose(r.weights, tensor(f, "weights"), kTolerance));
}

TEST(Fixtures, MultiHeadAttentionWithoutOutputProjection) {
  const std::string f = "mha_no_wo";
  const MhaResult r = reference::multi_head_attention(
      tensor(f, "x"), tensor(f, "wq"), tensor(f, "wk"), tensor(f, "wv"), Tensor{}, 2);
  EXPECT_TRUE(testing::AllClose(r.output, tensor(f, "out"), kTolerance));
  EXPECT_TRUE(testing::AllClose(r.weights, tensor(f, "weights"), kTolerance));
}

}  // namespace
}  // namespace attn
