// The attention backward: both paths against central finite differences of a double-precision
// forward (each mask kind, GQA, Tq ≠ Tk), the fused path against the reference over the
// forward's seeded sweep, thread-count independence, rows that see nothing, and bad input.
#include "attn/sdpa_backward.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "attention_sweep.hpp"
#include "attn/mask.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/threads.hpp"
#include "gradient_checks.hpp"
#include "simd_targets.hpp"
#include "src/attention/fused.hpp"
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

double largest_magnitude(const Tensor& t) {
  double largest = 0.0;
  for (float x : t.to_vector()) largest = std::max(largest, std::fabs(double{x}));
  return largest;
}

// dq, dk, dv each within tolerance · (the largest expected gradient of the three). Relative to
// the problem, not to each tensor: a gradient that is 0 in exact arithmetic (dQ when a query
// sees one key: dP − D cancels) is rounding noise at the scale of the terms that cancel.
::testing::AssertionResult GradientsClose(const SdpaGradients& a, const SdpaGradients& b,
                                          double tolerance, const std::string& what) {
  const double scale =
      std::max({largest_magnitude(b.dq), largest_magnitude(b.dk), largest_magnitude(b.dv), 1e-30});
  const std::pair<const char*, std::pair<const Tensor*, const Tensor*>> parts[] = {
      {"dq", {&a.dq, &b.dq}}, {"dk", {&a.dk, &b.dk}}, {"dv", {&a.dv, &b.dv}}};
  for (const auto& [name, tensors] : parts) {
    auto result = testing::AllClose(*tensors.first, *tensors.second, tolerance * scale);
    if (!result)
      return result << " [" << name << " of " << what << ", largest gradient " << scale << "]";
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------------
// Finite differences. The loss is L = Σ G ∘ O for a fixed random G, so dL/dO = G; its
// gradients with respect to Q, K and V are what sdpa_backward computes given d_out = G.

struct FiniteDifferenceCase {
  const char* name;
  int64_t batch, heads, kv_heads, tq, tk, d, dv;
  std::function<SdpaOptions(int64_t tq, int64_t tk)> options;
};

void CheckAgainstFiniteDifferences(const FiniteDifferenceCase& c) {
  SCOPED_TRACE(c.name);
  const uint64_t seed = std::hash<std::string>{}(c.name) % 1000;
  const Tensor q = rand_normal({c.batch, c.heads, c.tq, c.d}, seed + 1);
  const Tensor k = rand_normal({c.batch, c.kv_heads, c.tk, c.d}, seed + 2);
  const Tensor v = rand_normal({c.batch, c.kv_heads, c.tk, c.dv}, seed + 3);
  const Tensor g = rand_normal({c.batch, c.heads, c.tq, c.dv}, seed + 4);
  const SdpaOptions options = c.options(c.tq, c.tk);

  DoubleProblem p{c.batch,       c.heads,       c.kv_heads,    c.tq,          c.tk, c.d, c.dv,
                  to_doubles(q), to_doubles(k), to_doubles(v), to_doubles(g), {},   {},  options};
  const Tensor dq = numerical_gradient(p, &DoubleProblem::q, q.shape(), attention_loss);
  const Tensor dk = numerical_gradient(p, &DoubleProblem::k, k.shape(), attention_loss);
  const Tensor dv = numerical_gradient(p, &DoubleProblem::v, v.shape(), attention_loss);

  const SdpaGradients ref = reference::sdpa_backward(q, k, v, g, options);
  const SdpaResult forward = sdpa(q, k, v, options);
  SdpaGradients fused, two_pass;
  {
    LoopOrder order(LoopOrder::kOneTaskPerHead);
    fused = sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
  }
  {
    LoopOrder order(LoopOrder::kTwoPasses);
    two_pass = sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
  }
  const std::pair<const char*, const SdpaGradients*> paths[] = {
      {"reference", &ref}, {"fused", &fused}, {"fused, two passes", &two_pass}};
  for (const auto& [path, grads] : paths) {
    EXPECT_TRUE(RelativelyClose(grads->dq, dq, 1e-4, std::string(path) + " dq"));
    EXPECT_TRUE(RelativelyClose(grads->dk, dk, 1e-4, std::string(path) + " dk"));
    EXPECT_TRUE(RelativelyClose(grads->dv, dv, 1e-4, std::string(path) + " dv"));
  }
}

SdpaOptions no_mask_options(int64_t, int64_t) { return {}; }
SdpaOptions causal_options(int64_t, int64_t) { return testing::causal(); }
SdpaOptions window_options(int64_t, int64_t) {
  SdpaOptions o;
  o.window = 3;
  return o;
}
SdpaOptions boolean_mask_options(int64_t tq, int64_t tk) {
  Tensor allow = rand_uniform({tq, tk}, 5);
  for (float& x : std::span(allow.data(), static_cast<size_t>(allow.numel()))) x = x > 0.4f;
  for (int64_t j = 0; j < tk; ++j) allow.at({1, j}) = 0.0f;  // a row that sees nothing
  SdpaOptions o;
  o.mask = Mask::allow(allow);
  return o;
}
SdpaOptions additive_mask_options(int64_t tq, int64_t tk) {
  SdpaOptions o;
  o.mask = Mask::additive(rand_normal({tq, tk}, 6));
  return o;
}
SdpaOptions padded_keys(int64_t, int64_t tk) {
  SdpaOptions o;
  o.key_lengths = {tk - 2, 3};
  return o;
}
SdpaOptions scaled_causal(int64_t, int64_t) {
  SdpaOptions o = testing::causal();
  o.scale = 0.9f;
  return o;
}

TEST(SdpaBackward, BothPathsMatchFiniteDifferences) {
  const FiniteDifferenceCase cases[] = {
      {"plain", 1, 2, 2, 5, 5, 4, 4, no_mask_options},
      {"causal Tq<Tk", 2, 2, 2, 4, 7, 4, 3, causal_options},
      {"causal Tq>Tk (rows that see nothing)", 1, 1, 1, 7, 4, 3, 3, causal_options},
      {"sliding window", 1, 2, 2, 8, 8, 4, 4, window_options},
      {"boolean mask", 1, 2, 2, 5, 6, 4, 5, boolean_mask_options},
      {"additive mask", 1, 2, 2, 5, 6, 4, 4, additive_mask_options},
      {"key lengths", 2, 1, 1, 4, 6, 4, 4, padded_keys},
      {"GQA 4:2 causal", 2, 4, 2, 5, 6, 4, 4, causal_options},
      {"MQA 3:1 custom scale", 1, 3, 1, 6, 6, 5, 2, scaled_causal},
  };
  for (const auto& c : cases) CheckAgainstFiniteDifferences(c);
}

// ---------------------------------------------------------------------------------------
// Fused against reference over the forward's sweep, to 1e-5 of the largest gradient.

::testing::AssertionResult FusedMatchesReference(const testing::SweepCase& c) {
  std::mt19937_64 gen(c.seed);
  const Tensor q = testing::make_input(c.batch, c.heads, c.tq, c.d, c.bthd_layout, c.seed + 1);
  const Tensor k =
      testing::make_input(c.batch, c.heads / c.group, c.tk, c.d, c.bthd_layout, c.seed + 2);
  const Tensor v =
      testing::make_input(c.batch, c.heads / c.group, c.tk, c.dv, c.bthd_layout, c.seed + 3);
  const Tensor g = testing::make_input(c.batch, c.heads, c.tq, c.dv, c.bthd_layout, c.seed + 4);
  const SdpaOptions options = testing::make_options(c, gen);
  set_num_threads(c.threads);
  const SdpaResult forward = sdpa(q, k, v, options);
  LoopOrder one_task_per_head(LoopOrder::kOneTaskPerHead);
  const SdpaGradients per_head =
      sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
  LoopOrder two_passes(LoopOrder::kTwoPasses);
  const SdpaGradients two_pass =
      sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, options);
  set_num_threads(0);
  const SdpaGradients ref = reference::sdpa_backward(q, k, v, g, options);
  auto result = GradientsClose(per_head, ref, 1e-5, testing::describe(c) + ", one task per head");
  if (result) result = GradientsClose(two_pass, ref, 1e-5, testing::describe(c) + ", two passes");
  return result;
}

class BackwardSweep : public ::testing::TestWithParam<testing::SweepCase> {};

TEST_P(BackwardSweep, FusedMatchesTheReference) { EXPECT_TRUE(FusedMatchesReference(GetParam())); }

// The forward's sweep, less its costliest case (B·H·Tq·Tk·d = 8·1000·500·256): its reference
// backward, plain loops, alone took 6.6 s (about 30 s under the sanitizers). d = 256 is
// covered at shorter lengths, T = 1000 at the other widths.
std::vector<testing::SweepCase> backward_sweep() {
  std::vector<testing::SweepCase> cases;
  for (const auto& c : testing::attention_sweep()) {
    if (c.batch * c.heads * c.tq * c.tk * std::max(c.d, c.dv) <= 300'000'000) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BackwardSweep, ::testing::ValuesIn(backward_sweep()));

// As the forward's test of the same name: every SIMD target this machine runs.
TEST(SdpaBackward, EverySimdTargetMatchesTheReference) {
  testing::for_each_simd_target([](const char* target) {
    for (const testing::SweepCase& c :
         {testing::SweepCase{12, 4, 1, 64, 64, 32, 32, testing::MaskCase::kCausal, true, 2, 5},
          testing::SweepCase{2, 4, 2, 70, 135, 24, 24, testing::MaskCase::kCausal, false, 1, 6},
          testing::SweepCase{1, 2, 1, 33, 33, 8, 8, testing::MaskCase::kNone, true, 2, 7}}) {
      EXPECT_TRUE(FusedMatchesReference(c)) << "on " << target;
    }
  });
}

// Under the sanitizers GQA ratios 1 and 8 (the middle one, 2, takes the same paths): the
// reference backward's plain loops made this the longest test of the TSan run (40 s).
TEST(SdpaBackward, EveryMaskKindAndLayout) {
#ifdef ATTN_TESTS_INSTRUMENTED
  const std::vector<int64_t> groups = {1, 8};
#else
  const std::vector<int64_t> groups = {1, 2, 8};
#endif
  for (testing::MaskCase mask : testing::kMaskCases) {
    for (bool bthd : {false, true}) {
      for (int64_t group : groups) {
        EXPECT_TRUE(FusedMatchesReference({2, 8, group, 70, 135, 24, 24, mask, bthd, 2, 78}));
      }
    }
  }
}

TEST(SdpaBackward, ResultsDoNotDependOnTheThreadCount) {
  const Tensor q = rand_normal({2, 4, 200, 64}, 1), k = rand_normal({2, 2, 230, 64}, 2),
               v = rand_normal({2, 2, 230, 64}, 3), g = rand_normal({2, 4, 200, 64}, 4);
  const SdpaOptions o = testing::causal();
  const SdpaResult f = sdpa(q, k, v, o);
  for (auto kind : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
    LoopOrder order(kind);
    SdpaGradients runs[3];
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      runs[threads - 1] = sdpa_backward(q, k, v, f.output, f.logsumexp, g, o);
    }
    set_num_threads(0);
    for (int i : {1, 2}) {
      EXPECT_TRUE(BitwiseEqual(runs[0].dq, runs[i].dq)) << "loop order " << kind;
      EXPECT_TRUE(BitwiseEqual(runs[0].dk, runs[i].dk)) << "loop order " << kind;
      EXPECT_TRUE(BitwiseEqual(runs[0].dv, runs[i].dv)) << "loop order " << kind;
    }
  }
}

// The fused backward writes every element of the gradient views it is given (the layers pass
// views into reused buffers): query blocks that see no key, whole padded batch entries and
// padding keys included, in both loop orders.
TEST(SdpaBackward, WritesEveryGradientElementIntoReusedViews) {
  // Causal, bottom-right, Tq = 200 > Tk = 30: queries 0..169 sit before key 0, so query blocks
  // 0 and 1 see no key; batch entry 1 has no key at all.
  const Tensor q = rand_normal({2, 1, 200, 16}, 4), k = rand_normal({2, 1, 30, 16}, 5),
               v = rand_normal({2, 1, 30, 16}, 6), g = rand_normal({2, 1, 200, 16}, 7);
  SdpaOptions o = testing::causal();
  o.key_lengths = {30, 0};
  const SdpaResult f = sdpa(q, k, v, o);
  for (const LoopOrder::Kind kind : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
    LoopOrder order(kind);
    const SdpaGradients fresh = sdpa_backward(q, k, v, f.output, f.logsumexp, g, o);  // zeroed
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Tensor dq = Tensor::full(q.shape(), nan), dk = Tensor::full(k.shape(), nan),
           dv = Tensor::full(v.shape(), nan);
    const Tensor lse = f.logsumexp.contiguous();
    detail::sdpa_backward_into(detail::check_attention(q, k, v, o), q, k, v, f.output, lse.data(),
                               g, o, dq, dk, dv);
    EXPECT_EQ(dq.to_vector(), fresh.dq.to_vector()) << kind;
    EXPECT_EQ(dk.to_vector(), fresh.dk.to_vector()) << kind;
    EXPECT_EQ(dv.to_vector(), fresh.dv.to_vector()) << kind;
  }
}

TEST(SdpaBackward, KeysNoQuerySeesGetZeroGradient) {
  // Causal with Tq < Tk... every key is seen; padding keys and rows before every key are not.
  const Tensor q = rand_normal({1, 90, 16}, 4), k = rand_normal({1, 30, 16}, 5),
               v = rand_normal({1, 30, 16}, 6), g = rand_normal({1, 90, 16}, 7);
  SdpaOptions o = testing::causal();
  o.key_lengths = {20};
  const SdpaResult f = sdpa(q, k, v, o);
  const SdpaGradients grads = sdpa_backward(q, k, v, f.output, f.logsumexp, g, o);
  for (int64_t i = 0; i < 60; ++i) {  // queries 0..59 sit before key 0
    for (int64_t e = 0; e < 16; ++e) ASSERT_EQ(grads.dq.at({0, i, e}), 0.0f) << i;
  }
  for (int64_t j = 20; j < 30; ++j) {  // padding keys
    for (int64_t e = 0; e < 16; ++e) {
      ASSERT_EQ(grads.dk.at({0, j, e}), 0.0f) << j;
      ASSERT_EQ(grads.dv.at({0, j, e}), 0.0f) << j;
    }
  }
  for (const Tensor& t : {grads.dq, grads.dk, grads.dv}) {
    for (float x : t.to_vector()) ASSERT_TRUE(std::isfinite(x));
  }
}

// Scores of ±1e4: the logsumexp (≈ 1e4) is stored to a float's 6e-4 absolute precision, so P
// recomputed from it is good to about 1e-4 relative (as in any flash backward); no NaN or inf.
TEST(SdpaBackward, HugeScoresStayFinite) {
  Tensor q = Tensor::full({1, 3, 1}, 100.0f),
         k = Tensor::from_values({1, 4, 1}, {100, -100, 99.9f, 0});
  const Tensor v = Tensor::from_values({1, 4, 1}, {1, 2, 3, 4}), g = Tensor::full({1, 3, 1}, 1.0f);
  SdpaOptions o;
  o.scale = 1.0f;
  const SdpaResult f = sdpa(q, k, v, o);
  const SdpaGradients fused = sdpa_backward(q, k, v, f.output, f.logsumexp, g, o);
  const SdpaGradients ref = reference::sdpa_backward(q, k, v, g, o);
  EXPECT_TRUE(GradientsClose(fused, ref, 1e-3, "scores of 1e4"));
  for (const Tensor& t : {fused.dq, fused.dk, fused.dv}) {
    for (float x : t.to_vector()) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(SdpaBackward, RejectsInputsThatDoNotFit) {
  const Tensor q = rand_normal({2, 5, 4}, 1), k = rand_normal({2, 6, 4}, 2),
               v = rand_normal({2, 6, 3}, 3), g = rand_normal({2, 5, 3}, 4);
  const SdpaResult f = sdpa(q, k, v);
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_backward(q, k, v, f.output, f.logsumexp, rand_normal({2, 5, 4}, 5));
      },
      "d_out must have the output's shape (2, 5, 3)"));
  EXPECT_TRUE(ThrowsWith([&] { reference::sdpa_backward(q, k, v, Tensor{}); }, "d_out must have"));
  EXPECT_TRUE(ThrowsWith([&] { sdpa_backward(q, k, v, f.output, f.logsumexp.slice(0, 1), g); },
                         "logsumexp must be (2, 5)"));
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_backward(q, k, v, q, f.logsumexp, g); }, "out must be (2, 5, 3)"));
  Tensor bad_lse = f.logsumexp.clone();
  bad_lse.at({1, 2}) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_backward(q, k, v, f.output, bad_lse, g); }, "logsumexp holds nan"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_backward(q, rand_normal({2, 6, 5}, 6), v, f.output, f.logsumexp, g);
      },
      "k's last dim"));
}

}  // namespace
}  // namespace attn
