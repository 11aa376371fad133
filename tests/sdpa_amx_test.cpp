// The fused forward's and backward's bf16 products on packed tiles — AMX's
// (src/kernels/amx_tiles.hpp) and AVX-512 BF16's vdpbf16ps (src/kernels/dpbf16_tiles.hpp), the
// two engines of the same route (flash_forward_amx.cpp, flash_backward.cpp) — each against the
// vector kernels' bf16 products in the same process: the same roundings of Q, K, V, dO, P and
// dS, so the two differ only by the order of float32 sums (and a P or dS that rounds the other
// way because of it) — the output within 4u·max|V| (u = 2^-9), each gradient within 2u of its
// largest element — over every shape and rule the kernels take: GQA, Tq ≠ Tk and both causal
// alignments, widths that need padding, query rows not a multiple of the tiles, sliding
// windows, key lengths, both mask kinds (and the additive mask's gradient), the score variants
// and a negative scale, both backward loop orders. 1 and 2 threads give the same bits. Each
// engine is skipped where the CPU lacks it (vdpbf16ps runs on every CPU with AMX too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/simd.hpp"
#include "attn/threads.hpp"
#include "bf16_engines.hpp"
#include "gradient_checks.hpp"
#include "src/core/simd_cap.hpp"
#include "test_util.hpp"

namespace attn {
namespace sdpa_amx_test {  // its own names: the sanitizer builds compile tests in unity batches
namespace {

using testing::BitwiseEqual;
using testing::LoopOrder;

constexpr double kUnit = 0x1p-9;

struct AmxCase {
  std::string name;
  int64_t batch, heads, kv_heads, tq, tk, d, dv;
  SdpaOptions options;
};

std::vector<AmxCase> amx_cases() {
  std::vector<AmxCase> cases;
  auto add = [&](std::string name, int64_t b, int64_t h, int64_t hkv, int64_t tq, int64_t tk,
                 int64_t d, int64_t dv, SdpaOptions o) {
    o.precision = Dtype::kBFloat16;
    cases.push_back({std::move(name), b, h, hkv, tq, tk, d, dv, std::move(o)});
  };
  SdpaOptions full, causal;
  causal.causal = true;
  add("full", 1, 2, 2, 200, 200, 64, 64, full);
  add("causal", 1, 2, 2, 300, 300, 64, 64, causal);
  // Past one key chunk (kKeyChunk, 512): dQ stays in its rows between chunks (a whole block's as
  // the tiles' dQᵀ, transposed after the last chunk; the last, partial, block's put back and
  // taken up again); 1100 = 17 blocks of 64 queries and 12.
  add("causal, three key chunks", 1, 1, 1, 1100, 1100, 64, 64, causal);
  add("GQA causal", 1, 4, 2, 130, 130, 64, 64, causal);
  add("d 40, dv 24", 1, 2, 2, 77, 77, 40, 24, causal);
  add("d 128", 1, 2, 1, 96, 96, 128, 128, causal);
  add("one query", 1, 2, 2, 1, 1, 64, 64, causal);
  add("Tq < Tk, bottom-right", 1, 2, 2, 50, 333, 64, 64, causal);
  SdpaOptions top_left = causal;
  top_left.causal_align = CausalAlign::kTopLeft;
  add("Tq < Tk, top-left", 1, 2, 2, 50, 333, 64, 64, top_left);
  SdpaOptions window = causal;
  window.window = 40;
  add("sliding window", 1, 2, 2, 260, 260, 64, 64, window);
  SdpaOptions lengths;
  lengths.key_lengths = {150, 37};
  add("key lengths", 2, 2, 2, 60, 150, 64, 64, lengths);
  SdpaOptions allowed;
  Tensor allow = rand_uniform({1, 1, 90, 90}, 11);
  for (int64_t i = 0; i < allow.numel(); ++i)
    allow.data()[i] = allow.data()[i] < 0.7f ? 1.0f : 0.0f;
  allowed.mask = Mask::allow(allow);
  add("boolean mask", 1, 2, 2, 90, 90, 64, 64, allowed);
  SdpaOptions additive;
  additive.mask = Mask::additive(rand_normal({1, 2, 90, 90}, 12));
  additive.return_mask_gradient = true;
  add("additive mask", 1, 2, 2, 90, 90, 64, 64, additive);
  SdpaOptions softcap = causal;
  softcap.softcap = 5.0f;
  add("softcap", 1, 2, 2, 140, 140, 64, 64, softcap);
  SdpaOptions alibi = causal;
  alibi.alibi_slopes = {0.5f, 0.0625f};
  add("ALiBi", 1, 2, 2, 140, 140, 64, 64, alibi);
  SdpaOptions sinks = causal;
  sinks.sinks = {1.5f, -0.5f};
  add("sinks", 1, 2, 2, 140, 140, 64, 64, sinks);
  // The forward folds a positive scale into its softmax; a negative one it applies first.
  SdpaOptions negative_scale = causal;
  negative_scale.scale = -0.125f;
  add("negative scale", 1, 2, 2, 140, 140, 64, 64, negative_scale);
  return cases;
}

using testing::Bf16Engine;
using testing::with_bf16_engine;

const char* name_of(Bf16Engine e) { return e == Bf16Engine::kAmx ? "AMX" : "vdpbf16ps"; }

SdpaResult forward(const AmxCase& c, Bf16Engine engine) {
  const Tensor q = rand_normal({c.batch, c.heads, c.tq, c.d}, 1);
  const Tensor k = rand_normal({c.batch, c.kv_heads, c.tk, c.d}, 2);
  const Tensor v = rand_normal({c.batch, c.kv_heads, c.tk, c.dv}, 3);
  return with_bf16_engine(engine, [&] { return sdpa(q, k, v, c.options); });
}

SdpaGradients backward(const AmxCase& c, Bf16Engine engine) {
  const SdpaResult forward_pass = forward(c, engine);
  const Tensor q = rand_normal({c.batch, c.heads, c.tq, c.d}, 1);
  const Tensor k = rand_normal({c.batch, c.kv_heads, c.tk, c.d}, 2);
  const Tensor v = rand_normal({c.batch, c.kv_heads, c.tk, c.dv}, 3);
  const Tensor d_out = rand_normal({c.batch, c.heads, c.tq, c.dv}, 4);
  return with_bf16_engine(engine, [&] {
    return sdpa_backward(q, k, v, forward_pass.output, forward_pass.logsumexp, d_out, c.options);
  });
}

// max |a − b| / max |b|.
double relative_worst(const Tensor& a, const Tensor& b) {
  double worst = 0.0, largest = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::fabs(double{a.data()[i]} - b.data()[i]));
    largest = std::max(largest, double{std::fabs(b.data()[i])});
  }
  return largest == 0.0 ? worst : worst / largest;
}

class SdpaAmx : public ::testing::TestWithParam<Bf16Engine> {
 protected:
  void SetUp() override {
    const std::string missing = bf16_engine_missing(GetParam());
    if (!missing.empty())
      GTEST_SKIP() << missing
                   << ": the bf16 products run on the vector kernels, tested in "
                      "sdpa_bf16_products_test";
  }
};

TEST_P(SdpaAmx, MatchesTheVectorKernelsBf16ProductsOnEveryShapeAndRule) {
  double largest_difference = 0.0;
  for (const AmxCase& c : amx_cases()) {
    SCOPED_TRACE(c.name);
    const SdpaResult tiles = forward(c, GetParam()), vectors = forward(c, Bf16Engine::kVector);
    const Tensor v = rand_normal({c.batch, c.kv_heads, c.tk, c.dv}, 3);
    double v_max = 0.0, worst = 0.0;
    for (float x : v.to_vector()) v_max = std::max(v_max, double{std::fabs(x)});
    for (int64_t i = 0; i < tiles.output.numel(); ++i)
      worst = std::max(worst, std::fabs(double{tiles.output.data()[i]} - vectors.output.data()[i]));
    EXPECT_LE(worst, 4 * kUnit * v_max);
    largest_difference = std::max(largest_difference, worst);
    for (int64_t i = 0; i < tiles.logsumexp.numel(); ++i) {
      const float a = tiles.logsumexp.data()[i], b = vectors.logsumexp.data()[i];
      if (std::isinf(b)) {
        EXPECT_EQ(a, b) << "row " << i;
      } else {
        EXPECT_NEAR(a, b, 1e-3 * (1.0 + std::fabs(b))) << "row " << i;
      }
    }
  }
  // The tiles sum in another order: had the vector kernels run, nothing would differ.
  EXPECT_GT(largest_difference, 0.0);
}

TEST_P(SdpaAmx, GradientsMatchTheVectorKernelsBf16ProductsInBothLoopOrders) {
  double largest_difference = 0.0;
  for (LoopOrder::Kind order : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
    const LoopOrder loop_order(order);
    for (const AmxCase& c : amx_cases()) {
      SCOPED_TRACE(c.name + (order == LoopOrder::kTwoPasses ? ", two passes" : ", per head"));
      const SdpaGradients tiles = backward(c, GetParam()),
                          vectors = backward(c, Bf16Engine::kVector);
      const double dq = relative_worst(tiles.dq, vectors.dq);
      const double dk = relative_worst(tiles.dk, vectors.dk);
      const double dv = relative_worst(tiles.dv, vectors.dv);
      EXPECT_LE(dq, 2 * kUnit);
      EXPECT_LE(dk, 2 * kUnit);
      EXPECT_LE(dv, 2 * kUnit);
      if (vectors.dsinks.defined()) {
        EXPECT_LE(relative_worst(tiles.dsinks, vectors.dsinks), 2 * kUnit);
      }
      if (vectors.dmask.defined()) {
        EXPECT_LE(relative_worst(tiles.dmask, vectors.dmask), 2 * kUnit);
      }
      largest_difference = std::max({largest_difference, dq, dk, dv});
    }
  }
  std::printf(
      "%s against the vector kernels' bf16 products: gradients within %.2e of their "
      "largest element\n",
      name_of(GetParam()), largest_difference);
  EXPECT_GT(largest_difference, 0.0);
}

TEST_P(SdpaAmx, OneAndTwoThreadsGiveTheSameBits) {
  const int threads = num_threads();
  for (const AmxCase& c : amx_cases()) {
    SCOPED_TRACE(c.name);
    set_num_threads(1);
    const SdpaResult one = forward(c, GetParam());
    set_num_threads(2);
    const SdpaResult two = forward(c, GetParam());
    EXPECT_TRUE(BitwiseEqual(one.output, two.output));
    EXPECT_TRUE(BitwiseEqual(one.logsumexp, two.logsumexp));
    set_num_threads(1);
    const SdpaGradients g1 = backward(c, GetParam());
    set_num_threads(2);
    const SdpaGradients g2 = backward(c, GetParam());
    EXPECT_TRUE(BitwiseEqual(g1.dq, g2.dq));
    EXPECT_TRUE(BitwiseEqual(g1.dk, g2.dk));
    EXPECT_TRUE(BitwiseEqual(g1.dv, g2.dv));
  }
  set_num_threads(threads);
}

// attn::bf16_attention_engine names the engine each switch setting runs.
TEST(Bf16AttentionEngine, NamesTheEngineThatRuns) {
  const bool amx = with_bf16_engine(Bf16Engine::kAmx, [] { return detail::amx_bf16_usable(); });
  const bool dpbf16 = with_bf16_engine(Bf16Engine::kDpbf16, [] { return detail::dpbf16_usable(); });
  EXPECT_EQ(with_bf16_engine(Bf16Engine::kAmx, [] { return bf16_attention_engine(); }),
            amx ? "amx" : "vector");
  EXPECT_EQ(with_bf16_engine(Bf16Engine::kDpbf16, [] { return bf16_attention_engine(); }),
            dpbf16 ? "vdpbf16ps" : "vector");
  EXPECT_EQ(with_bf16_engine(Bf16Engine::kVector, [] { return bf16_attention_engine(); }),
            "vector");
}

INSTANTIATE_TEST_SUITE_P(Engines, SdpaAmx, ::testing::Values(Bf16Engine::kAmx, Bf16Engine::kDpbf16),
                         [](const ::testing::TestParamInfo<Bf16Engine>& info) {
                           return testing::param_name(info.param);
                         });

}  // namespace
}  // namespace sdpa_amx_test
}  // namespace attn
