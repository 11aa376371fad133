// Properties of attention over many seeded random shapes (ranks 2-4, GQA ratios, Tq ≠ Tk,
// odd head dims, causal or not):
//   - every row of weights sums to 1 (or is all zeros when the row can see no key);
//   - causal invariance: perturbing positions after t leaves outputs up to t bitwise identical;
//   - permuting keys and values together leaves a non-causal output unchanged;
//   - each output is a convex combination of the values it can see.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

struct Case {
  Shape q, k, v;
  bool causal;
  uint64_t seed;
};

// A random but reproducible problem shape for each seed.
Case make_case(uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(gen() % static_cast<uint64_t>(hi - lo + 1));
  };
  const int rank = static_cast<int>(pick(2, 4));
  const int64_t kv_heads = pick(1, 3), group = pick(1, 3);
  const int64_t tq = pick(1, 17), tk = pick(1, 17), d = pick(1, 20), dv = pick(1, 12);
  Shape lead;
  if (rank == 4) lead = {pick(1, 2), kv_heads * group};
  if (rank == 3) lead = {kv_heads * group};
  Shape kv_lead = lead;
  if (!kv_lead.empty()) kv_lead.back() = kv_heads;
  auto with = [](Shape s, int64_t t, int64_t w) {
    s.push_back(t);
    s.push_back(w);
    return s;
  };
  return {with(lead, tq, d), with(kv_lead, tk, d), with(kv_lead, tk, dv), pick(0, 1) == 1, seed};
}

class SdpaProperties : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override {
    c_ = make_case(GetParam());
    q_ = rand_normal(c_.q, c_.seed * 3 + 1);
    k_ = rand_normal(c_.k, c_.seed * 3 + 2);
    v_ = rand_normal(c_.v, c_.seed * 3 + 3);
    options_.causal = c_.causal;
  }
  std::string describe() const {
    return "q " + to_string(c_.q) + " k " + to_string(c_.k) + " v " + to_string(c_.v) +
           (c_.causal ? " causal" : "");
  }
  Case c_;
  Tensor q_, k_, v_;
  SdpaOptions options_;
};

TEST_P(SdpaProperties, RowsSumToOneOrAreEmpty) {
  const SdpaResult r = reference::sdpa(q_, k_, v_, options_);
  const int64_t tq = q_.dim(-2), tk = k_.dim(-2);
  const std::vector<float> w = r.weights.to_vector();
  for (size_t row = 0; row < w.size() / tk; ++row) {
    double sum = 0;
    for (int64_t j = 0; j < tk; ++j) sum += w[row * tk + j];
    const int64_t i = static_cast<int64_t>(row) % tq;
    const bool sees_a_key = !c_.causal || tk - tq + i >= 0;
    ASSERT_NEAR(sum, sees_a_key ? 1.0 : 0.0, 1e-6) << describe() << " row " << row;
  }
  for (float x : r.output.to_vector()) ASSERT_FALSE(std::isnan(x)) << describe();
}

TEST_P(SdpaProperties, CausalOutputsIgnoreLaterPositions) {
  // Self-attention: Q, K, V all come from the same T positions.
  Shape shape = c_.k;
  const int64_t t_len = shape[shape.size() - 2];
  const Tensor x = rand_normal(shape, c_.seed + 7);
  SdpaOptions causal;
  causal.causal = true;
  const Tensor before = reference::sdpa(x, x, x, causal).output;
  const int64_t t = static_cast<int64_t>(c_.seed % static_cast<uint64_t>(t_len));
  Tensor perturbed = x.clone();
  const Tensor noise = rand_normal(shape, c_.seed + 8);
  const int64_t d = shape.back();
  float* p = perturbed.data();
  const float* n = noise.data();
  for (int64_t flat = 0; flat < perturbed.numel(); ++flat) {
    const int64_t position = (flat / d) % t_len;
    if (position > t) p[flat] += 3.0f * n[flat];
  }
  const Tensor after = reference::sdpa(perturbed, perturbed, perturbed, causal).output;
  const std::vector<float> a = before.to_vector(), b = after.to_vector();
  for (size_t flat = 0; flat < a.size(); ++flat) {
    const int64_t position = (static_cast<int64_t>(flat) / d) % t_len;
    if (position <= t) {
      ASSERT_EQ(std::memcmp(&a[flat], &b[flat], sizeof(float)), 0)
          << describe() << " position " << position << " <= t = " << t;
    }
  }
}

TEST_P(SdpaProperties, PermutingKeysWithValuesLeavesOutputUnchanged) {
  SdpaOptions plain;  // permutation invariance holds without a position-based mask
  const int64_t tk = k_.dim(-2);
  std::vector<int64_t> order(static_cast<size_t>(tk));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(c_.seed));
  // Row j of the permuted K/V is row order[j] of the original, in every leading slice.
  auto permute_rows = [&](const Tensor& t) {
    Tensor out(t.shape());
    const int64_t w = t.dim(-1);
    const float* src = t.data();
    float* dst = out.data();
    for (int64_t slice = 0; slice < t.numel() / (tk * w); ++slice) {
      for (int64_t j = 0; j < tk; ++j) {
        std::copy_n(src + (slice * tk + order[j]) * w, w, dst + (slice * tk + j) * w);
      }
    }
    return out;
  };
  const Tensor a = reference::sdpa(q_, k_, v_, plain).output;
  const Tensor b = reference::sdpa(q_, permute_rows(k_), permute_rows(v_), plain).output;
  EXPECT_TRUE(testing::AllClose(a, b, 1e-6)) << describe();
}

TEST_P(SdpaProperties, OutputsLieBetweenTheSmallestAndLargestValue) {
  const SdpaResult r = reference::sdpa(q_, k_, v_, options_);
  const std::vector<float> v = v_.to_vector();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  for (float x : r.output.to_vector()) {
    ASSERT_GE(x, std::min(0.0f, *lo) - 1e-5f) << describe();
    ASSERT_LE(x, std::max(0.0f, *hi) + 1e-5f) << describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, SdpaProperties, ::testing::Range<uint64_t>(0, 60));

}  // namespace
}  // namespace attn
