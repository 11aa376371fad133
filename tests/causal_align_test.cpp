// Causal alignment when Tq ≠ Tk: bottom-right (the default: query i at Tk − Tq + i) and
// top-left (PyTorch's is_causal: query i at i). The oracle is an explicit boolean mask built
// here from the definition, against both paths, forward and backward.
#include <gtest/gtest.h>

#include "attn/error.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mask.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::AllClose;
using testing::ThrowsWith;

// (tq, tk) boolean mask: query i sees key j when j ≤ i (top-left) or j ≤ tk − tq + i.
Tensor tril_mask(int64_t tq, int64_t tk, bool top_left) {
  Tensor allow({tq, tk});
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t position = top_left ? i : tk - tq + i;
    for (int64_t j = 0; j < tk; ++j) allow.at({i, j}) = j <= position ? 1.0f : 0.0f;
  }
  return allow;
}

SdpaOptions causal_aligned(CausalAlign align) {
  SdpaOptions o;
  o.causal = true;
  o.causal_align = align;
  return o;
}

struct Shape2 {
  int64_t tq, tk;
};
constexpr Shape2 kShapes[] = {{5, 9}, {9, 5}, {1, 7}, {7, 1}, {64, 130}, {130, 64}, {65, 65}};

TEST(CausalAlign, BothAlignmentsEqualTheirExplicitMaskOnBothPaths) {
  for (const Shape2 s : kShapes) {
    for (const bool top_left : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "tq=" << s.tq << " tk=" << s.tk
                                        << (top_left ? " top-left" : " bottom-right"));
      const Tensor q = rand_normal({2, 3, s.tq, 16}, 1), k = rand_normal({2, 3, s.tk, 16}, 2),
                   v = rand_normal({2, 3, s.tk, 8}, 3);
      const SdpaOptions spec =
          causal_aligned(top_left ? CausalAlign::kTopLeft : CausalAlign::kBottomRight);
      SdpaOptions explicit_mask;
      explicit_mask.mask = Mask::allow(tril_mask(s.tq, s.tk, top_left));
      const SdpaResult ref_spec = reference::sdpa(q, k, v, spec);
      const SdpaResult ref_mask = reference::sdpa(q, k, v, explicit_mask);
      EXPECT_TRUE(testing::BitwiseEqual(ref_spec.weights, ref_mask.weights));
      const SdpaResult fused_spec = sdpa(q, k, v, spec);
      const SdpaResult fused_mask = sdpa(q, k, v, explicit_mask);
      EXPECT_TRUE(AllClose(fused_spec.output, ref_mask.output, 2e-6));
      EXPECT_TRUE(AllClose(fused_spec.output, fused_mask.output, 2e-6));

      const Tensor d_out = rand_normal({2, 3, s.tq, 8}, 4);
      const SdpaGradients g_spec =
          sdpa_backward(q, k, v, fused_spec.output, fused_spec.logsumexp, d_out, spec);
      const SdpaGradients g_ref = reference::sdpa_backward(q, k, v, d_out, explicit_mask);
      EXPECT_TRUE(AllClose(g_spec.dq, g_ref.dq, 1e-5));
      EXPECT_TRUE(AllClose(g_spec.dk, g_ref.dk, 1e-5));
      EXPECT_TRUE(AllClose(g_spec.dv, g_ref.dv, 1e-5));
      const SdpaGradients g_ref_spec = reference::sdpa_backward(q, k, v, d_out, spec);
      EXPECT_TRUE(AllClose(g_ref_spec.dq, g_ref.dq, 1e-6));
    }
  }
}

TEST(CausalAlign, TheAlignmentsDifferOnlyWhenTqDiffersFromTk) {
  const Tensor q = rand_normal({1, 2, 6, 8}, 5), k = rand_normal({1, 2, 10, 8}, 6),
               v = rand_normal({1, 2, 10, 8}, 7);
  const Tensor bottom = sdpa(q, k, v, causal_aligned(CausalAlign::kBottomRight)).output;
  const Tensor top = sdpa(q, k, v, causal_aligned(CausalAlign::kTopLeft)).output;
  EXPECT_FALSE(AllClose(bottom, top, 1e-3));
  const Tensor k_square = k.slice(0, 1).as_strided({1, 2, 6, 8}, {160, 80, 8, 1});
  const Tensor v_square = v.slice(0, 1).as_strided({1, 2, 6, 8}, {160, 80, 8, 1});
  EXPECT_TRUE(testing::BitwiseEqual(
      sdpa(q, k_square, v_square, causal_aligned(CausalAlign::kBottomRight)).output,
      sdpa(q, k_square, v_square, causal_aligned(CausalAlign::kTopLeft)).output));
}

TEST(CausalAlign, TopLeftWithMoreQueriesThanKeysSeesEveryKeyPastTheLast) {
  // Query i ≥ Tk sees all Tk keys; with bottom-right the first Tq − Tk queries see none.
  const Tensor q = rand_normal({1, 1, 7, 4}, 8), k = rand_normal({1, 1, 3, 4}, 9),
               v = rand_normal({1, 1, 3, 4}, 10);
  const SdpaResult top = reference::sdpa(q, k, v, causal_aligned(CausalAlign::kTopLeft));
  const SdpaResult bottom = reference::sdpa(q, k, v, causal_aligned(CausalAlign::kBottomRight));
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_GT(top.weights.at({0, 0, 6, j}), 0.0f);
    EXPECT_EQ(bottom.weights.at({0, 0, 0, j}), 0.0f);
  }
  EXPECT_EQ(top.weights.at({0, 0, 0, 1}), 0.0f);
}

TEST(CausalAlign, CausalMaskAndNames) {
  EXPECT_TRUE(
      testing::BitwiseEqual(causal_mask(4, 6, CausalAlign::kTopLeft), tril_mask(4, 6, true)));
  EXPECT_TRUE(testing::BitwiseEqual(causal_mask(6, 4), tril_mask(6, 4, false)));
  EXPECT_EQ(to_string(CausalAlign::kTopLeft), "top-left");
  EXPECT_EQ(causal_align_from_string("bottom-right"), CausalAlign::kBottomRight);
  EXPECT_TRUE(ThrowsWith([] { causal_align_from_string("left"); },
                         "causal alignment must be bottom-right or top-left, got 'left'"));
}

TEST(CausalAlign, ACacheRefusesTopLeft) {
  KVCacheConfig c;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.capacity = 8;
  KVCache cache(c);
  cache.append(rand_normal({1, 1, 3, 4}, 1), rand_normal({1, 1, 3, 4}, 2));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        attend_cached(rand_normal({1, 1, 1, 4}, 3), cache, causal_aligned(CausalAlign::kTopLeft));
      },
      "top-left causal alignment does not apply to a cache"));
}

}  // namespace
}  // namespace attn
