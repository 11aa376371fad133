// bf16 products (SdpaOptions::precision = kBFloat16), forward and backward: within the stated
// bound of a float64 attention of the unrounded inputs (the worst element printed); exactly
// the roundings it names — against the float kernels on pre-rounded inputs the output moves
// by no more than P's rounding allows, and does move; the fused kernels against the reference
// path's roundings, causal and not, GQA, Tq ≠ Tk, both backward loop orders, every SIMD
// target; packed sequences; 1 and 2 threads bitwise; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attn/bfloat16.hpp"
#include "attn/kv_cache.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/sdpa_varlen.hpp"
#include "attn/threads.hpp"
#include "bf16_engines.hpp"
#include "gradient_checks.hpp"
#include "simd_targets.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::BitwiseEqual;
using testing::LoopOrder;
using testing::RelativelyClose;
using testing::ThrowsWith;

// bf16's unit roundoff: a rounded value is within 2^-9 of the value, relatively.
constexpr double kUnit = 0x1p-9;

SdpaOptions bf16_options(bool causal) {
  SdpaOptions o;
  o.causal = causal;
  o.precision = Dtype::kBFloat16;
  return o;
}

Tensor bf16_rounded(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.data()[i] = from_bfloat16(to_bfloat16(r.data()[i]));
  return r;
}

float largest_abs_value(const Tensor& t) {
  float m = 0.0f;
  for (float x : t.to_vector()) m = std::max(m, std::fabs(x));
  return m;
}

double worst_abs_difference(const Tensor& a, const Tensor& b) {
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(double{a.data()[i]} - double{b.data()[i]}));
  return worst;
}

// Attention of (H, T, d) q, k, v in float64, bottom-right causal or full; and the largest
// scale·Σ_e |q_e·k_e| over the pairs that are seen (the bound's A).
struct DoubleAttention {
  std::vector<double> out;
  double largest_abs_score = 0.0;
};

DoubleAttention attention_in_doubles(const Tensor& q, const Tensor& k, const Tensor& v,
                                     bool causal) {
  const int64_t heads = q.dim(1), tq = q.dim(2), tk = k.dim(2), d = q.dim(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  DoubleAttention r;
  r.out.assign(static_cast<size_t>(q.numel()), 0.0);
  const float *qp = q.data(), *kp = k.data(), *vp = v.data();
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t kv = h / (heads / k.dim(1));
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t last = causal ? tk - tq + i : tk - 1;
      std::vector<double> s(static_cast<size_t>(last + 1));
      double m = -1e300;
      for (int64_t j = 0; j <= last; ++j) {
        double dot = 0.0, magnitude = 0.0;
        for (int64_t e = 0; e < d; ++e) {
          const double a = qp[(h * tq + i) * d + e], b = kp[(kv * tk + j) * d + e];
          dot += a * b;
          magnitude += std::fabs(a * b);
        }
        s[static_cast<size_t>(j)] = dot * scale;
        r.largest_abs_score = std::max(r.largest_abs_score, magnitude * scale);
        m = std::max(m, dot * scale);
      }
      double l = 0.0;
      for (double& x : s) l += (x = std::exp(x - m));
      for (int64_t e = 0; e < d; ++e) {
        double o = 0.0;
        for (int64_t j = 0; j <= last; ++j)
          o += s[static_cast<size_t>(j)] * vp[(kv * tk + j) * d + e];
        r.out[static_cast<size_t>((h * tq + i) * d + e)] = o / l;
      }
    }
  }
  return r;
}

// The stated bound (docs/design.md): rounding Q and K moves each score by at most 2u·A
// (A = scale·Σ|q_e·k_e|), which moves the weights by a factor within e^{±4u·A}; rounding V and
// P adds u·max|V| each: |ΔO| ≤ max|V|·(2u + (e^{4u·A} − 1)).
TEST(SdpaBf16Products, ForwardStaysWithinTheStatedBoundOfFloat64) {
  for (bool causal : {false, true}) {
    const Tensor q = rand_normal({1, 4, 300, 64}, 1), k = rand_normal({1, 2, 300, 64}, 2);
    const Tensor v = rand_normal({1, 2, 300, 64}, 3);
    const SdpaResult bf16 = sdpa(q, k, v, bf16_options(causal));
    const DoubleAttention exact = attention_in_doubles(q, k, v, causal);
    double worst = 0.0, float_worst = 0.0;
    SdpaOptions f32;
    f32.causal = causal;
    const Tensor float_out = sdpa(q, k, v, f32).output;
    for (int64_t i = 0; i < q.numel(); ++i) {
      const double x = exact.out[static_cast<size_t>(i)];
      worst = std::max(worst, std::fabs(bf16.output.data()[i] - x));
      float_worst = std::max(float_worst, std::fabs(float_out.data()[i] - x));
    }
    const double v_max = largest_abs_value(v);
    const double bound = v_max * (2 * kUnit + std::expm1(4 * kUnit * exact.largest_abs_score));
    std::printf(
        "bf16 products, %s: worst |O − O_float64| %.3g = %.2e·max|V| (float32 %.2e; "
        "bound %.2e)\n",
        causal ? "causal" : "full", worst, worst / v_max, float_worst / v_max, bound / v_max);
    EXPECT_LE(worst, bound);
    EXPECT_GT(worst, 10 * float_worst);  // it did round
  }
}

// Against the float kernels given the rounded Q, K, V (and dO): the one difference left in the
// forward is P rounded before P·V, Σ_j (bf16(p_j) − p_j)·v_j ≤ u·max|V| — and it is there; in
// the backward (both given the same O and logsumexp) P rounded for dV and dS for dQ and dK.
TEST(SdpaBf16Products, RoundsPAndDsBeforeTheirProducts) {
  testing::for_each_simd_target([](const char* target) {
    const Tensor q = rand_normal({2, 4, 130, 32}, 4), k = rand_normal({2, 4, 150, 32}, 5);
    const Tensor v = rand_normal({2, 4, 150, 32}, 6), g = rand_normal({2, 4, 130, 32}, 25);
    SdpaOptions f32;
    f32.causal = true;
    const SdpaResult a = sdpa(q, k, v, bf16_options(true));
    const Tensor b = sdpa(bf16_rounded(q), bf16_rounded(k), bf16_rounded(v), f32).output;
    const double difference = worst_abs_difference(a.output, b);
    EXPECT_LE(difference, 1.01 * kUnit * largest_abs_value(v)) << target;
    EXPECT_GT(difference, 0.0) << target;
    const SdpaGradients da = sdpa_backward(q, k, v, a.output, a.logsumexp, g, bf16_options(true));
    const SdpaGradients db = sdpa_backward(bf16_rounded(q), bf16_rounded(k), bf16_rounded(v),
                                           a.output, a.logsumexp, bf16_rounded(g), f32);
    const Tensor* pairs[][2] = {{&da.dq, &db.dq}, {&da.dk, &db.dk}, {&da.dv, &db.dv}};
    for (const auto& pair : pairs) {
      const double moved = worst_abs_difference(*pair[0], *pair[1]) / largest_abs_value(*pair[1]);
      EXPECT_GT(moved, 0.0) << target;
      EXPECT_LT(moved, 1e-2) << target;
    }
  });
}

// Fused against the reference path (the same roundings; P is rounded before the division by
// the row sum in the fused kernel and after it in the reference, so they may differ by 2u·max|V|
// in the output), and the backward: gradients from the same rounded operands, P and dS rounded
// in different orders — within 2 % of the largest gradient, both loop orders, every target.
TEST(SdpaBf16Products, FusedMatchesTheReferenceRoundings) {
  struct Shape4 {
    int64_t heads, kv_heads, tq, tk, d;
    bool causal;
  };
  const Shape4 shapes[] = {
      {4, 4, 100, 100, 64, true}, {4, 2, 70, 130, 32, true}, {2, 1, 90, 60, 16, false}};
  testing::for_each_simd_target([&](const char* target) {
    for (const Shape4& s : shapes) {
      SCOPED_TRACE(std::string(target) + " d=" + std::to_string(s.d));
      const Tensor q = rand_normal({1, s.heads, s.tq, s.d}, 7);
      const Tensor k = rand_normal({1, s.kv_heads, s.tk, s.d}, 8);
      const Tensor v = rand_normal({1, s.kv_heads, s.tk, s.d}, 9);
      const Tensor g = rand_normal({1, s.heads, s.tq, s.d}, 10);
      const SdpaOptions o = bf16_options(s.causal);
      const SdpaResult fused = sdpa(q, k, v, o);
      const SdpaResult ref = reference::sdpa(q, k, v, o);
      EXPECT_LE(worst_abs_difference(fused.output, ref.output),
                2.01 * kUnit * largest_abs_value(v) + 1e-5);
      const SdpaGradients expected = reference::sdpa_backward(q, k, v, g, o);
      for (bool two : {false, true}) {
        LoopOrder order(two ? LoopOrder::kTwoPasses : LoopOrder::kOneTaskPerHead);
        const SdpaGradients got = sdpa_backward(q, k, v, fused.output, fused.logsumexp, g, o);
        EXPECT_TRUE(RelativelyClose(got.dq, expected.dq, 2e-2, "dq"));
        EXPECT_TRUE(RelativelyClose(got.dk, expected.dk, 2e-2, "dk"));
        EXPECT_TRUE(RelativelyClose(got.dv, expected.dv, 2e-2, "dv"));
      }
    }
  });
}

// The backward against float64 finite differences of the float loss: bf16 products change
// the gradients by the roundings' size, not their direction (5 % of the largest gradient; the
// worst printed), and the float path stays far tighter.
TEST(SdpaBf16Products, BackwardStaysNearTheExactGradients) {
  const Tensor q = rand_normal({1, 2, 40, 16}, 11), k = rand_normal({1, 2, 40, 16}, 12);
  const Tensor v = rand_normal({1, 2, 40, 16}, 13), g = rand_normal({1, 2, 40, 16}, 14);
  const SdpaOptions o = bf16_options(true);
  SdpaOptions exact_options = testing::causal();
  testing::DoubleProblem p{1,
                           2,
                           2,
                           40,
                           40,
                           16,
                           16,
                           testing::to_doubles(q),
                           testing::to_doubles(k),
                           testing::to_doubles(v),
                           testing::to_doubles(g),
                           {},
                           {},
                           exact_options};
  const Tensor dq = testing::numerical_gradient(p, &testing::DoubleProblem::q, q.shape(),
                                                testing::attention_loss);
  const Tensor dk = testing::numerical_gradient(p, &testing::DoubleProblem::k, k.shape(),
                                                testing::attention_loss);
  const Tensor dv = testing::numerical_gradient(p, &testing::DoubleProblem::v, v.shape(),
                                                testing::attention_loss);
  const SdpaResult forward = sdpa(q, k, v, o);
  const SdpaGradients got = sdpa_backward(q, k, v, forward.output, forward.logsumexp, g, o);
  const char* names[] = {"dq", "dk", "dv"};
  const Tensor* exact[] = {&dq, &dk, &dv};
  const Tensor* mine[] = {&got.dq, &got.dk, &got.dv};
  for (int i = 0; i < 3; ++i) {
    std::printf("bf16 products: worst |%s − exact| = %.2e·max|%s|\n", names[i],
                worst_abs_difference(*mine[i], *exact[i]) / largest_abs_value(*exact[i]), names[i]);
    EXPECT_TRUE(RelativelyClose(*mine[i], *exact[i], 5e-2, names[i]));
  }
}

TEST(SdpaBf16Products, PackedSequencesAreEachSequenceAlone) {
  const std::vector<int64_t> cu = {0, 50, 170, 200};
  const Tensor q = rand_normal({200, 4, 32}, 15), k = rand_normal({200, 2, 32}, 16);
  const Tensor v = rand_normal({200, 2, 32}, 17);
  const SdpaOptions o = bf16_options(true);
  const SdpaResult packed = sdpa_varlen(q, k, v, cu, cu, o);
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    const int64_t first = cu[s], length = cu[s + 1] - cu[s];
    auto alone = [&](const Tensor& t) {
      return t.slice(first, length)
          .permute({1, 0, 2})
          .contiguous()
          .reshape({1, t.dim(1), length, t.dim(2)});
    };
    const Tensor expected = sdpa(alone(q), alone(k), alone(v), o).output;
    EXPECT_TRUE(BitwiseEqual(alone(packed.output), expected)) << "sequence " << s;
  }
}

// Q, K, V whose rows lie apart (a layer's columns of one (B, T, 3·H·d) tensor, viewed (B, H, T,
// d)) are rounded from where they lie — by the vector route's copy, row by row, or by the tiles'
// packers — to the bits of the same values in contiguous tensors, forward and backward, on
// every engine this CPU runs.
TEST(SdpaBf16Products, RowsApartGiveTheBitsOfContiguousRows) {
  const Tensor qkv = rand_normal({2, 80, 3 * 4 * 32}, 23), g = rand_normal({2, 4, 80, 32}, 24);
  auto part = [&](int64_t i) {
    return qkv.as_strided({2, 4, 80, 32}, {80 * 3 * 4 * 32, 32, 3 * 4 * 32, 1}, i * 4 * 32);
  };
  const Tensor q = part(0), k = part(1), v = part(2);
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const SdpaOptions o = bf16_options(true);
  for (const testing::Bf16Engine engine :
       {testing::Bf16Engine::kAmx, testing::Bf16Engine::kDpbf16, testing::Bf16Engine::kVector}) {
    if (!testing::bf16_engine_missing(engine).empty()) continue;
    SCOPED_TRACE(testing::param_name(engine));
    const testing::OnlyBf16Engine only(engine);
    const SdpaResult apart = sdpa(q, k, v, o), together = sdpa(qc, kc, vc, o);
    EXPECT_TRUE(BitwiseEqual(apart.output, together.output));
    const SdpaGradients a = sdpa_backward(q, k, v, apart.output, apart.logsumexp, g, o);
    const SdpaGradients c = sdpa_backward(qc, kc, vc, together.output, together.logsumexp, g, o);
    EXPECT_TRUE(BitwiseEqual(a.dq, c.dq));
    EXPECT_TRUE(BitwiseEqual(a.dk, c.dk));
    EXPECT_TRUE(BitwiseEqual(a.dv, c.dv));
  }
}

TEST(SdpaBf16Products, ResultsDoNotDependOnTheThreadCount) {
  const Tensor q = rand_normal({1, 4, 500, 64}, 18), k = rand_normal({1, 4, 500, 64}, 19);
  const Tensor v = rand_normal({1, 4, 500, 64}, 20), g = rand_normal({1, 4, 500, 64}, 21);
  const SdpaOptions o = bf16_options(true);
  SdpaResult f[2];
  SdpaGradients b[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    f[threads - 1] = sdpa(q, k, v, o);
    b[threads - 1] = sdpa_backward(q, k, v, f[threads - 1].output, f[threads - 1].logsumexp, g, o);
  }
  set_num_threads(0);
  EXPECT_TRUE(BitwiseEqual(f[0].output, f[1].output));
  EXPECT_TRUE(BitwiseEqual(b[0].dq, b[1].dq));
  EXPECT_TRUE(BitwiseEqual(b[0].dk, b[1].dk));
  EXPECT_TRUE(BitwiseEqual(b[0].dv, b[1].dv));
}

TEST(SdpaBf16Products, Errors) {
  const Tensor q = rand_normal({1, 1, 4, 8}, 22);
  SdpaOptions q8;
  q8.precision = Dtype::kQ8;
  EXPECT_TRUE(ThrowsWith([&] { sdpa(q, q, q, q8); }, "sdpa: precision: q8 is a KV cache storage"));
  KVCacheConfig c;
  c.head_dim = 8;
  c.capacity = 8;
  KVCache cache(c);
  cache.append(rand_normal({1, 1, 2, 8}, 23), rand_normal({1, 1, 2, 8}, 24));
  EXPECT_TRUE(ThrowsWith([&] { attend_cached(q.slice(0, 1), cache, bf16_options(false)); },
                         "attend_cached: bf16 products do not apply to a cache"));
}

}  // namespace
}  // namespace attn
