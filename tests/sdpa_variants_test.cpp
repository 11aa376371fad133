// The score variants (SdpaOptions softcap, alibi_slopes, sinks), forward and backward: the
// reference path against a float64 loss written from the definitions, by finite differences
// (the sink's gradient too); the fused kernels against the reference over every mask kind,
// GQA, Tq ≠ Tk, both causal alignments, both backward loop orders and every SIMD target;
// 1 and 2 threads bitwise; known answers; the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention_sweep.hpp"
#include "attn/bfloat16.hpp"
#include "attn/kv_cache.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/threads.hpp"
#include "gradient_checks.hpp"
#include "simd_targets.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/mask_gradient.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::attention_loss;
using testing::BitwiseEqual;
using testing::DoubleProblem;
using testing::LoopOrder;
using testing::numerical_gradient;
using testing::RelativelyClose;
using testing::ThrowsWith;
using testing::to_doubles;

// Which variants a case turns on; each draws its values from the seed.
struct Variants {
  bool softcap, alibi, sinks;
};

std::string describe_variants(const Variants& v) {
  std::string s;
  if (v.softcap) s += " softcap";
  if (v.alibi) s += " alibi";
  if (v.sinks) s += " sinks";
  return s.empty() ? " none" : s;
}

void add_variants(SdpaOptions& o, const Variants& v, int64_t heads, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  if (v.softcap) o.softcap = 0.5f + 2.0f * unit(gen);  // small enough to bend the scores
  for (int64_t h = 0; v.alibi && h < heads; ++h) o.alibi_slopes.push_back(std::exp2(-1.0f - h));
  for (int64_t h = 0; v.sinks && h < heads; ++h) o.sinks.push_back(4.0f * unit(gen) - 2.0f);
}

const Variants kVariantSets[] = {
    {true, false, false}, {false, true, false}, {false, false, true}, {true, true, true}};

struct SmallCase {
  const char* name;
  int64_t batch, heads, kv_heads, tq, tk, d;
  SdpaOptions base;
};

TEST(SdpaVariants, EveryPathMatchesFiniteDifferencesOfTheDefinition) {
  SdpaOptions causal = testing::causal(), top_left = testing::causal(), window, lengths, mask;
  top_left.causal_align = CausalAlign::kTopLeft;
  window.window = 3;
  lengths.key_lengths = {4, 2};
  mask.mask = Mask::additive(rand_normal({5, 6}, 9));
  const SmallCase cases[] = {
      {"plain", 1, 2, 2, 5, 5, 4, SdpaOptions{}},
      {"causal Tq<Tk", 2, 2, 2, 4, 7, 4, causal},
      {"causal top-left Tq>Tk (rows that see nothing)", 1, 2, 2, 6, 4, 3, top_left},
      {"sliding window, GQA 4:2", 1, 4, 2, 7, 7, 4, window},
      {"key lengths", 2, 2, 1, 4, 6, 4, lengths},
      {"additive mask", 1, 2, 2, 5, 6, 4, mask},
  };
  for (const SmallCase& c : cases) {
    for (const Variants& variants : kVariantSets) {
      const std::string what = std::string(c.name) + describe_variants(variants);
      SCOPED_TRACE(what);
      const uint64_t seed = std::hash<std::string>{}(what) % 1000;
      const Tensor q = rand_normal({c.batch, c.heads, c.tq, c.d}, seed + 1);
      const Tensor k = rand_normal({c.batch, c.kv_heads, c.tk, c.d}, seed + 2);
      const Tensor v = rand_normal({c.batch, c.kv_heads, c.tk, c.d}, seed + 3);
      const Tensor g = rand_normal({c.batch, c.heads, c.tq, c.d}, seed + 4);
      SdpaOptions options = c.base;
      add_variants(options, variants, c.heads, seed);
      DoubleProblem p{c.batch,
                      c.heads,
                      c.kv_heads,
                      c.tq,
                      c.tk,
                      c.d,
                      c.d,
                      to_doubles(q),
                      to_doubles(k),
                      to_doubles(v),
                      to_doubles(g),
                      {options.sinks.begin(), options.sinks.end()},
                      {},
                      options};
      const Tensor dq = numerical_gradient(p, &DoubleProblem::q, q.shape(), attention_loss);
      const Tensor dk = numerical_gradient(p, &DoubleProblem::k, k.shape(), attention_loss);
      const Tensor dv = numerical_gradient(p, &DoubleProblem::v, v.shape(), attention_loss);

      const SdpaResult forward = sdpa(q, k, v, options);
      // The loss itself, through the fused forward: Σ G ∘ O.
      double loss = 0.0;
      for (int64_t i = 0; i < g.numel(); ++i)
        loss += double{g.data()[i]} * forward.output.data()[i];
      EXPECT_NEAR(loss, attention_loss(p), 1e-4 * std::max(1.0, std::fabs(loss)));

      SdpaGradients paths[3];
      paths[0] = reference::sdpa_backward(q, k, v, g, options);
      for (bool two : {false, true}) {
        LoopOrder order(two ? LoopOrder::kTwoPasses : LoopOrder::kOneTaskPerHead);
        paths[1 + int{two}] = sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
      }
      const char* names[] = {"reference", "fused", "fused, two passes"};
      for (int i = 0; i < 3; ++i) {
        const std::string path = names[i];
        EXPECT_TRUE(RelativelyClose(paths[i].dq, dq, 1e-4, path + " dq"));
        EXPECT_TRUE(RelativelyClose(paths[i].dk, dk, 1e-4, path + " dk"));
        EXPECT_TRUE(RelativelyClose(paths[i].dv, dv, 1e-4, path + " dv"));
        if (variants.sinks) {
          const Tensor dsinks =
              numerical_gradient(p, &DoubleProblem::sinks, {c.heads}, attention_loss);
          ASSERT_TRUE(paths[i].dsinks.defined()) << path;
          EXPECT_TRUE(RelativelyClose(paths[i].dsinks, dsinks, 1e-4, path + " dsinks"));
        } else {
          EXPECT_FALSE(paths[i].dsinks.defined()) << path;
        }
      }
    }
  }
}

// The gradient of an additive mask (a learned bias): dS summed over the mask's broadcast dims,
// against central differences of the loss with respect to every score's bias, summed the same
// way; with and without the cap, causal, GQA, both loop orders.
TEST(SdpaVariants, TheMaskGradientMatchesFiniteDifferences) {
  const int64_t batch = 2, heads = 4, kv_heads = 2, tq = 5, tk = 6, d = 4;
  const Tensor q = rand_normal({batch, heads, tq, d}, 1),
               k = rand_normal({batch, kv_heads, tk, d}, 2),
               v = rand_normal({batch, kv_heads, tk, d}, 3),
               g = rand_normal({batch, heads, tq, d}, 4);
  for (const Shape& mask_shape :
       {Shape{tq, tk}, Shape{heads, 1, tk}, Shape{batch, 1, tq, tk}, Shape{batch, heads, tq, tk}}) {
    for (bool capped : {false, true}) {
      const std::string what = to_string(mask_shape) + (capped ? " softcap" : "");
      SCOPED_TRACE(what);
      SdpaOptions options = testing::causal();
      options.causal_align = CausalAlign::kTopLeft;
      if (capped) options.softcap = 1.5f;
      options.mask = Mask::additive(rand_normal(mask_shape, 5));
      options.return_mask_gradient = true;
      // The mask expanded to every score, and the loss's gradient with respect to each.
      const Tensor full =
          detail::as_rank4(detail::broadcast_mask(options.mask, {batch, heads, tq, tk}))
              .contiguous();
      SdpaOptions without_mask = options;
      without_mask.mask = Mask{};
      DoubleProblem p{batch,
                      heads,
                      kv_heads,
                      tq,
                      tk,
                      d,
                      d,
                      to_doubles(q),
                      to_doubles(k),
                      to_doubles(v),
                      to_doubles(g),
                      {},
                      to_doubles(full),
                      without_mask};
      const Tensor per_score =
          numerical_gradient(p, &DoubleProblem::bias, full.shape(), attention_loss);
      const Tensor expected = detail::reduce_to_mask_shape(per_score, options.mask);

      const SdpaResult forward = sdpa(q, k, v, options);
      EXPECT_TRUE(RelativelyClose(reference::sdpa_backward(q, k, v, g, options).dmask, expected,
                                  1e-4, "reference"));
      for (auto order : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
        LoopOrder forced(order);
        const SdpaGradients got =
            sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
        EXPECT_TRUE(RelativelyClose(got.dmask, expected, 1e-4, "fused"));
        EXPECT_EQ(got.dmask.shape(), mask_shape);
      }
    }
  }
  // Asked for without an additive mask: a clear error.
  SdpaOptions boolean;
  boolean.mask = Mask::allow(Tensor::full({tq, tk}, 1.0f));
  boolean.return_mask_gradient = true;
  const SdpaResult f = sdpa(q, k, v, boolean);
  EXPECT_TRUE(ThrowsWith([&] { sdpa_backward(q, k, v, f.output, f.logsumexp, g, boolean); },
                         "return_mask_gradient needs an additive (float) mask"));
}

// The same against the reference on shapes that cross the kernels' blocks and fill their
// transposed tiles (the finite differences' shapes fit in one tile edge), on every SIMD target.
// 192 keys put every gradient row on a vector boundary, so its tiles go out as streaming
// stores; 170 keys do not (plain stores).
TEST(SdpaVariants, TheMaskGradientMatchesTheReferenceOnLargerShapes) {
  for (int64_t tk : {170, 192}) {
    const Tensor q = rand_normal({2, 4, 150, 16}, 1), k = rand_normal({2, 2, tk, 16}, 2),
                 v = rand_normal({2, 2, tk, 16}, 3), g = rand_normal({2, 4, 150, 16}, 4);
    testing::for_each_simd_target([&](const char* target) {
      for (const Shape& mask_shape : {Shape{2, 4, 150, tk}, Shape{4, 1, tk}}) {
        for (bool causal : {false, true}) {
          SdpaOptions options;
          options.causal = causal;
          options.mask = Mask::additive(rand_normal(mask_shape, 5));
          options.return_mask_gradient = true;
          const SdpaResult forward = sdpa(q, k, v, options);
          const Tensor expected = reference::sdpa_backward(q, k, v, g, options).dmask;
          for (auto order : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
            LoopOrder forced(order);
            const SdpaGradients got =
                sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
            EXPECT_TRUE(RelativelyClose(
                got.dmask, expected, 1e-5,
                std::string(target) + " " + to_string(mask_shape) + (causal ? " causal" : "")));
          }
        }
      }
    });
  }
}

// Into a buffer the caller keeps, filled with NaN first: the kernels write every element, the
// zeros no query sees included, so the result is the new tensor's, bit for bit; a broadcast
// mask's summed gradient is copied in. Both loop orders, causal alignments, a window, padded
// keys, rows aligned to vectors (192 keys: streaming stores) and not (170), every SIMD target.
TEST(SdpaVariants, TheMaskGradientIntoAKeptBufferIsTheNewOnesBits) {
  for (int64_t tk : {170, 192}) {
    const Tensor q = rand_normal({2, 4, 150, 16}, 1), k = rand_normal({2, 2, tk, 16}, 2),
                 v = rand_normal({2, 2, tk, 16}, 3), g = rand_normal({2, 4, 150, 16}, 4);
    testing::for_each_simd_target([&](const char* target) {
      for (const Shape& mask_shape : {Shape{2, 4, 150, tk}, Shape{4, 1, tk}}) {
        for (int rule = 0; rule < 4; ++rule) {
          SdpaOptions options;
          options.causal = rule != 0;
          if (rule == 2) options.causal_align = CausalAlign::kTopLeft;
          if (rule == 3) {
            options.window = 40;
            options.key_lengths = {tk, 90};
          }
          options.mask = Mask::additive(rand_normal(mask_shape, 5));
          options.return_mask_gradient = true;
          const SdpaResult forward = sdpa(q, k, v, options);
          const std::string what = std::string(target) + " " + to_string(mask_shape) + " rule " +
                                   std::to_string(rule) + " tk " + std::to_string(tk);
          for (auto order : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
            LoopOrder forced(order);
            const Tensor expected =
                sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options).dmask;
            const Tensor kept = Tensor::full(mask_shape, std::numeric_limits<float>::quiet_NaN());
            const SdpaGradients got =
                sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options, kept);
            EXPECT_TRUE(got.dmask.shares_storage(kept)) << what;
            EXPECT_TRUE(BitwiseEqual(kept, expected)) << what;
          }
        }
      }
    });
  }
}

TEST(SdpaVariants, AKeptMaskGradientBufferIsChecked) {
  const Tensor q = rand_normal({1, 1, 16, 16}, 1), k = rand_normal({1, 1, 16, 16}, 2),
               v = rand_normal({1, 1, 16, 16}, 3), g = rand_normal({1, 1, 16, 16}, 4);
  SdpaOptions options;
  options.mask = Mask::additive(rand_normal({16, 16}, 5));
  const SdpaResult f = sdpa(q, k, v, options);
  auto into = [&](const Tensor& dmask) {
    return [&, dmask] { sdpa_backward(q, k, v, f.output, f.logsumexp, g, options, dmask); };
  };
  EXPECT_TRUE(ThrowsWith(into(Tensor{}), "dmask, the buffer for the mask's gradient"));
  EXPECT_TRUE(ThrowsWith(into(Tensor({16, 15})), "of the mask's shape (16, 16), got (16, 15)"));
  EXPECT_TRUE(ThrowsWith(into(Tensor({16, 16}).permute({1, 0})), "(not contiguous)"));
  EXPECT_TRUE(ThrowsWith(into(options.mask.values), "shares memory with the mask"));
  // Another view of the mask's memory (as Python's arrays are): caught by address, not storage.
  Tensor mask_memory = options.mask.values;
  const Tensor alias = Tensor::from_external(mask_memory.data(), 256, {16, 16}, {16, 1}, 0, {});
  EXPECT_TRUE(ThrowsWith(into(alias), "shares memory with the mask"));
  EXPECT_TRUE(ThrowsWith(into(q.reshape({16, 16})), "shares memory with an input"));
  EXPECT_TRUE(ThrowsWith(into(g.reshape({16, 16})), "shares memory with an input"));
  SdpaOptions boolean;
  boolean.mask = Mask::allow(Tensor::full({16, 16}, 1.0f));
  const SdpaResult fb = sdpa(q, k, v, boolean);
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_backward(q, k, v, fb.output, fb.logsumexp, g, boolean, Tensor({16, 16}));
      },
      "return_mask_gradient needs an additive (float) mask"));
}

// ---------------------------------------------------------------------------------------
// Fused against reference on shapes that cross the kernels' blocks (64 queries, 128 keys),
// every mask kind, forward and both backward orders.

::testing::AssertionResult VariantsMatchReference(const testing::SweepCase& c,
                                                  const Variants& variants) {
  std::mt19937_64 gen(c.seed);
  const Tensor q = testing::make_input(c.batch, c.heads, c.tq, c.d, c.bthd_layout, c.seed + 1);
  const Tensor k =
      testing::make_input(c.batch, c.heads / c.group, c.tk, c.d, c.bthd_layout, c.seed + 2);
  const Tensor v =
      testing::make_input(c.batch, c.heads / c.group, c.tk, c.dv, c.bthd_layout, c.seed + 3);
  const Tensor g = testing::make_input(c.batch, c.heads, c.tq, c.dv, c.bthd_layout, c.seed + 4);
  SdpaOptions options = testing::make_options(c, gen);
  add_variants(options, variants, c.heads, c.seed + 5);
  const std::string what = testing::describe(c) + describe_variants(variants);

  const SdpaResult ref = reference::sdpa(q, k, v, options);
  set_num_threads(c.threads);
  const SdpaResult fused = sdpa(q, k, v, options);
  auto result = RelativelyClose(fused.output, ref.output, 4e-6, what + ", forward");
  if (!result) return result;
  const SdpaGradients expected = reference::sdpa_backward(q, k, v, g, options);
  for (bool two : {false, true}) {
    LoopOrder order(two ? LoopOrder::kTwoPasses : LoopOrder::kOneTaskPerHead);
    const SdpaGradients got = sdpa_backward(q, k, v, fused.output, fused.logsumexp, g, options);
    const std::string path = what + (two ? ", two passes" : ", one task per head");
    double largest = 0.0;
    for (const Tensor* t : {&expected.dq, &expected.dk, &expected.dv})
      for (float x : t->to_vector()) largest = std::max(largest, std::fabs(double{x}));
    for (auto [name, a, b] :
         {std::tuple{"dq", &got.dq, &expected.dq}, std::tuple{"dk", &got.dk, &expected.dk},
          std::tuple{"dv", &got.dv, &expected.dv}}) {
      result = testing::AllClose(*a, *b, 2e-5 * std::max(largest, 1e-30));
      if (!result) return result << " [" << name << " of " << path << "]";
    }
    if (variants.sinks) {
      result = RelativelyClose(got.dsinks, expected.dsinks, 1e-4, path + " dsinks");
      if (!result) return result;
    }
  }
  set_num_threads(0);
  return ::testing::AssertionSuccess();
}

TEST(SdpaVariants, FusedMatchesTheReferenceForEveryMaskKind) {
  uint64_t seed = 100;
  for (testing::MaskCase mask : testing::kMaskCases) {
    for (const Variants& variants : kVariantSets) {
      const int64_t group = seed % 3 == 0 ? 2 : 1;
      const testing::SweepCase c{2,
                                 2 * group,
                                 group,
                                 70,
                                 150,
                                 24,
                                 24,
                                 mask,
                                 seed % 2 == 0,
                                 1 + static_cast<int>(seed % 2),
                                 seed};
      ++seed;
      EXPECT_TRUE(VariantsMatchReference(c, variants));
    }
  }
}

TEST(SdpaVariants, EverySimdTargetMatchesTheReference) {
  testing::for_each_simd_target([](const char* target) {
    for (const Variants& variants : kVariantSets) {
      for (const testing::SweepCase& c :
           {testing::SweepCase{12, 4, 1, 64, 64, 32, 32, testing::MaskCase::kCausal, true, 2, 5},
            testing::SweepCase{1, 4, 2, 130, 200, 20, 20, testing::MaskCase::kNone, false, 1, 6}}) {
        EXPECT_TRUE(VariantsMatchReference(c, variants)) << "on " << target;
      }
    }
  });
}

TEST(SdpaVariants, OneAndTwoThreadsGiveTheSameBits) {
  const Tensor q = rand_normal({2, 4, 300, 32}, 1), k = rand_normal({2, 2, 300, 32}, 2),
               v = rand_normal({2, 2, 300, 32}, 3), g = rand_normal({2, 4, 300, 32}, 4);
  SdpaOptions options = testing::causal();
  add_variants(options, {true, true, true}, 4, 5);
  SdpaResult forward[2];
  SdpaGradients grads[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    forward[threads - 1] = sdpa(q, k, v, options);
    grads[threads - 1] = sdpa_backward(q, k, v, forward[threads - 1].output,
                                       forward[threads - 1].logsumexp, g, options);
  }
  set_num_threads(0);
  EXPECT_TRUE(BitwiseEqual(forward[0].output, forward[1].output));
  EXPECT_TRUE(BitwiseEqual(forward[0].logsumexp, forward[1].logsumexp));
  EXPECT_TRUE(BitwiseEqual(grads[0].dq, grads[1].dq));
  EXPECT_TRUE(BitwiseEqual(grads[0].dk, grads[1].dk));
  EXPECT_TRUE(BitwiseEqual(grads[0].dv, grads[1].dv));
  EXPECT_TRUE(BitwiseEqual(grads[0].dsinks, grads[1].dsinks));
}

// Known answers: a sink far below every score changes nothing; a sink that dominates leaves
// almost no weight; a slope of 0 and a cap far above the scores are the plain attention; a
// row that sees no key gets zeros and logsumexp = its sink; the weights sum to 1 − e^{sink − L}.
TEST(SdpaVariants, KnownAnswers) {
  const Tensor q = rand_normal({1, 2, 40, 16}, 1), k = rand_normal({1, 2, 40, 16}, 2),
               v = rand_normal({1, 2, 40, 16}, 3);
  const SdpaResult plain = sdpa(q, k, v, testing::causal());
  SdpaOptions quiet = testing::causal();
  quiet.sinks = {-60.0f, -60.0f};
  quiet.alibi_slopes = {0.0f, 0.0f};
  quiet.softcap = 1e6f;
  EXPECT_TRUE(RelativelyClose(sdpa(q, k, v, quiet).output, plain.output, 1e-5, "quiet variants"));

  SdpaOptions loud = testing::causal();
  loud.sinks = {60.0f, 60.0f};
  const Tensor out = sdpa(q, k, v, loud).output;
  for (float x : out.to_vector()) EXPECT_LT(std::fabs(x), 1e-12f);

  SdpaOptions hidden;  // query 0 sees no key: top-left causal with its keys past the end
  hidden.key_starts = {10};
  hidden.causal = true;
  hidden.causal_align = CausalAlign::kTopLeft;
  hidden.sinks = {0.5f, -1.5f};
  const SdpaResult r = sdpa(q, k, v, hidden);
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_FLOAT_EQ(r.logsumexp.at({0, h, 0}), hidden.sinks[static_cast<size_t>(h)]);
    for (int64_t e = 0; e < 16; ++e) EXPECT_EQ(r.output.at({0, h, 0, e}), 0.0f);
  }
  SdpaOptions weights = hidden;
  weights.return_weights = true;
  const SdpaResult w = sdpa(q, k, v, weights);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 10; i < 40; ++i) {
      double sum = 0.0;
      for (int64_t j = 0; j < 40; ++j) sum += w.weights.at({0, h, i, j});
      const double sink_weight =
          std::exp(hidden.sinks[static_cast<size_t>(h)] - w.logsumexp.at({0, h, i}));
      EXPECT_NEAR(sum + sink_weight, 1.0, 1e-5) << "head " << h << " row " << i;
    }
  }
}

// ALiBi's bias depends on the query's position: with Tq < Tk the default bottom-right
// alignment puts query i at Tk − Tq + i, and its nearest key (itself) gets no bias.
TEST(SdpaVariants, AlibiFollowsTheCausalAlignment) {
  const Tensor q = Tensor::zeros({1, 1, 2, 4}), k = rand_normal({1, 1, 5, 4}, 1),
               v = rand_normal({1, 1, 5, 4}, 2);
  SdpaOptions o;
  o.alibi_slopes = {1.0f};
  o.return_weights = true;
  const Tensor w = sdpa(q, k, v, o).weights;  // zero queries: the scores are the bias alone
  // Query 1 sits at position 4: weights ∝ e^{−|4 − j|}.
  double total = 0.0;
  for (int64_t j = 0; j < 5; ++j) total += std::exp(-std::fabs(4.0 - j));
  for (int64_t j = 0; j < 5; ++j)
    EXPECT_NEAR(w.at({0, 0, 1, j}), std::exp(-std::fabs(4.0 - j)) / total, 1e-6);
}

// x's values rounded to bfloat16 (what a bf16 cache holds).
Tensor rounded_to_bfloat16(const Tensor& x) {
  Tensor y = x.clone();
  for (int64_t i = 0; i < y.numel(); ++i) y.data()[i] = from_bfloat16(to_bfloat16(y.data()[i]));
  return y;
}

// Rows [start, start + n) of (B, H, T, d): (B, H, n, d).
Tensor cache_rows(const Tensor& x, int64_t start, int64_t n) {
  Tensor rows({x.dim(0), x.dim(1), n, x.dim(3)});
  for (int64_t b = 0; b < x.dim(0); ++b)
    for (int64_t h = 0; h < x.dim(1); ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < x.dim(3); ++e) rows.at({b, h, i, e}) = x.at({b, h, start + i, e});
  return rows;
}

Tensor last_query(const Tensor& q) { return cache_rows(q, q.dim(2) - 1, 1); }

// Decoding: a few new queries against a KV cache (the decode kernel; the sinks folded in when
// its chunks merge) and sdpa's route to the same kernel for one query row, against the
// reference on the same keys; a sliding-window ring cache and a bf16 cache too.
TEST(SdpaVariants, DecodingThroughTheCacheMatchesTheReference) {
  for (const Variants& variants : kVariantSets) {
    for (int64_t window : {0, 300}) {
      for (Dtype dtype : {Dtype::kFloat32, Dtype::kBFloat16}) {
        const std::string what = describe_variants(variants) + " window " + std::to_string(window) +
                                 (dtype == Dtype::kBFloat16 ? " bf16" : " f32");
        KVCacheConfig c;
        c.batch = 2;
        c.n_kv_heads = 2;
        c.head_dim = 32;
        c.window = window;
        c.capacity = window > 0 ? 0 : 1400;
        c.dtype = dtype;
        KVCache cache(c);
        const Tensor k = rand_normal({2, 2, 1300, 32}, 6), v = rand_normal({2, 2, 1300, 32}, 7);
        for (int64_t start = 0; start < 1300; start += 100) {  // a ring holds 315 positions
          cache.append(cache_rows(k, start, 100), cache_rows(v, start, 100));
        }
        const Tensor q = rand_normal({2, 4, 3, 32}, 8);
        SdpaOptions options = testing::causal();
        add_variants(options, variants, 4, 9);
        const SdpaResult cached = attend_cached(q, cache, options);
        // The reference sees the keys as the cache holds them (bf16 rounds them) and the window.
        const Tensor k_held = dtype == Dtype::kBFloat16 ? rounded_to_bfloat16(k) : k;
        const Tensor v_held = dtype == Dtype::kBFloat16 ? rounded_to_bfloat16(v) : v;
        options.window = window;
        const SdpaResult ref = reference::sdpa(q, k_held, v_held, options);
        EXPECT_TRUE(RelativelyClose(cached.output, ref.output, 1e-5, what));
        if (window == 0 && dtype == Dtype::kFloat32) {  // sdpa's one-row route
          const Tensor q1 = last_query(q);
          const SdpaResult row = sdpa(q1, k, v, options);
          EXPECT_TRUE(RelativelyClose(row.output, reference::sdpa(q1, k, v, options).output, 1e-5,
                                      what + ", sdpa one row"));
          EXPECT_TRUE(RelativelyClose(
              row.logsumexp, last_query(cached.logsumexp.reshape({2, 4, 3, 1})).reshape({2, 4, 1}),
              1e-5, what + ", logsumexp"));
        }
      }
    }
  }
}

TEST(SdpaVariants, BadArgumentsAreClearErrors) {
  const Tensor q = rand_normal({1, 2, 4, 8}, 1), k = rand_normal({1, 2, 4, 8}, 2);
  auto with = [&](auto set) {
    SdpaOptions o;
    set(o);
    return [&q, &k, o] { sdpa(q, k, k, o); };
  };
  EXPECT_TRUE(ThrowsWith(with([](SdpaOptions& o) { o.softcap = -1.0f; }), "softcap must be"));
  EXPECT_TRUE(ThrowsWith(with([](SdpaOptions& o) { o.softcap = NAN; }), "softcap must be"));
  EXPECT_TRUE(ThrowsWith(with([](SdpaOptions& o) { o.sinks = {1.0f}; }), "1 sinks for 2"));
  EXPECT_TRUE(ThrowsWith(with([](SdpaOptions& o) {
                           o.sinks = {1.0f, INFINITY};
                         }),
                         "sinks must be finite"));
  EXPECT_TRUE(ThrowsWith(with([](SdpaOptions& o) {
                           o.alibi_slopes = {1.0f, 2.0f, 3.0f};
                         }),
                         "3 alibi_slopes for 2"));
  EXPECT_TRUE(ThrowsWith(with([](SdpaOptions& o) {
                           o.alibi_slopes = {NAN, 1.0f};
                         }),
                         "alibi_slopes must be finite"));
}

}  // namespace
}  // namespace attn
