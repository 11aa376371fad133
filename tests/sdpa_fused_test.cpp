// The fused kernel against the reference path, over a seeded sweep of lengths (around the
// block size 64), head dims (1 to 256), Tq ≠ Tk, every mask kind, GQA ratios 1/2/8, both
// memory layouts and 1 or 2 threads; plus thread-count independence, fully masked rows,
// huge scores, the logsumexp, and bitwise causal invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "attention_sweep.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/threads.hpp"
#include "simd_targets.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::BitwiseEqual;
using testing::describe;
using testing::kMaskCases;
using testing::make_input;
using testing::make_options;
using testing::MaskCase;
using testing::SweepCase;

// max |fused − reference| / max |V| ≤ 2e-6, with the worst element in the message.
::testing::AssertionResult MatchesReference(const SweepCase& c) {
  std::mt19937_64 gen(c.seed);
  const Tensor q = make_input(c.batch, c.heads, c.tq, c.d, c.bthd_layout, c.seed + 1);
  const Tensor k = make_input(c.batch, c.heads / c.group, c.tk, c.d, c.bthd_layout, c.seed + 2);
  const Tensor v = make_input(c.batch, c.heads / c.group, c.tk, c.dv, c.bthd_layout, c.seed + 3);
  const SdpaOptions options = make_options(c, gen);
  set_num_threads(c.threads);
  const Tensor fused = sdpa(q, k, v, options).output;
  set_num_threads(0);
  const Tensor ref = reference::sdpa(q, k, v, options).output;
  float v_max = 0.0f;
  for (float x : v.to_vector()) v_max = std::max(v_max, std::fabs(x));
  return testing::AllClose(fused, ref, 2e-6 * v_max) << " for " << describe(c);
}

class FusedSweep : public ::testing::TestWithParam<SweepCase> {};

TEST_P(FusedSweep, MatchesTheReference) { EXPECT_TRUE(MatchesReference(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Shapes, FusedSweep, ::testing::ValuesIn(testing::attention_sweep()));

// The kernels on every SIMD target the machine can run, not only the one dispatch picks:
// the GPT's shape (T = 64, d = 32: whole transpose tiles) and shapes with edges (T = 70,
// d = 24; d = 8, narrower than a vector), causal and not, both layouts.
TEST(FusedSdpa, EverySimdTargetMatchesTheReference) {
  testing::for_each_simd_target([](const char* target) {
    for (const SweepCase& c : {SweepCase{12, 4, 1, 64, 64, 32, 32, MaskCase::kCausal, true, 2, 5},
                               SweepCase{2, 4, 2, 70, 135, 24, 24, MaskCase::kCausal, false, 1, 6},
                               SweepCase{1, 2, 1, 33, 33, 8, 8, MaskCase::kNone, true, 2, 7}}) {
      EXPECT_TRUE(MatchesReference(c)) << "on " << target;
    }
  });
}

// Every mask kind on one mid-sized shape that crosses block boundaries, both layouts.
TEST(FusedSdpa, EveryMaskKindAndLayout) {
  for (MaskCase mask : kMaskCases) {
    for (bool bthd : {false, true}) {
      for (int64_t group : {1, 2, 8}) {
        const SweepCase c{2, 8, group, 70, 135, 24, 24, mask, bthd, 2, 77};
        EXPECT_TRUE(MatchesReference(c));
      }
    }
  }
}

// Sliding windows whose first key falls on a key block's first key (kKeyBlock = 128), or one
// either side: the kernel skips the mask of blocks every query sees wholly, and must not skip
// the block where the window's edge starts.
TEST(FusedSdpa, WindowEdgesOnKeyBlockBoundaries) {
  const Tensor k = rand_normal({1, 300, 16}, 31), v = rand_normal({1, 300, 16}, 32);
  for (int64_t tq : {1, 3, 64}) {
    const Tensor q = rand_normal({1, tq, 16}, 33);
    const int64_t last_position = 299;  // bottom-right: the last query sits at the last key
    for (int64_t edge : {128, 256}) {
      for (int64_t shift : {-1, 0, 1}) {
        SdpaOptions o;
        o.window = last_position - edge + shift;  // the last query sees keys > edge − shift
        const Tensor fused = sdpa(q, k, v, o).output, ref = reference::sdpa(q, k, v, o).output;
        EXPECT_TRUE(testing::AllClose(fused, ref, 1e-5)) << "tq " << tq << ", window " << o.window;
      }
    }
  }
}

TEST(FusedSdpa, ResultsDoNotDependOnTheThreadCount) {
  const Tensor q = rand_normal({2, 3, 200, 64}, 1), k = rand_normal({2, 3, 230, 64}, 2),
               v = rand_normal({2, 3, 230, 64}, 3);
  SdpaOptions o;
  o.causal = true;
  set_num_threads(1);
  const SdpaResult one = sdpa(q, k, v, o);
  set_num_threads(2);
  const SdpaResult two = sdpa(q, k, v, o);
  set_num_threads(3);
  const SdpaResult three = sdpa(q, k, v, o);
  set_num_threads(0);
  EXPECT_TRUE(BitwiseEqual(one.output, two.output));
  EXPECT_TRUE(BitwiseEqual(one.output, three.output));
  EXPECT_TRUE(BitwiseEqual(one.logsumexp, two.logsumexp));
}

// One query row, or a few causal rows at the end of the keys, go to the decode kernel (its
// tasks split the keys in chunks of 512): head dims a multiple of its widest vector and others
// that must stay with the fused forward (d = 20 read past the caller's K under ASan), GQA,
// windows, keys across chunks, on every SIMD target.
TEST(FusedSdpa, FewRowsAgainstManyKeysMatchTheReference) {
  testing::for_each_simd_target([](const char* target) {
    uint64_t seed = 500;
    for (int64_t d : {16, 64, 20, 4}) {
      for (int64_t tq : {1, 3, 15}) {
        for (int64_t tk : {int64_t{15}, int64_t{1100}}) {
          const int64_t group = tq == 3 ? 4 : 1, window = tq == 15 && tk > 15 ? 600 : 0;
          const Tensor q = rand_normal({2, 4, tq, d}, ++seed),
                       k = rand_normal({2, 4 / group, tk, d}, ++seed),
                       v = rand_normal({2, 4 / group, tk, d}, ++seed);
          for (bool causal : {true, false}) {
            if (!causal && tq > 1) continue;  // several rows seeing every key: the fused path
            SdpaOptions o;
            o.causal = causal;
            o.window = causal ? window : 0;
            const Tensor fused = sdpa(q, k, v, o).output, ref = reference::sdpa(q, k, v, o).output;
            EXPECT_TRUE(testing::AllClose(fused, ref, 2e-5))
                << "on " << target << ": d " << d << ", tq " << tq << ", tk " << tk << ", group "
                << group << ", window " << o.window << (causal ? ", causal" : "");
          }
        }
      }
    }
  });
}

// K and V whose rows lie apart (a layer's Q, K, V columns, a packed batch's rows) take the
// decode kernel too, at their stride: the same bits as their contiguous copies, a NaN among
// them still named. With 8 and more chunks of keys per thread pair, one task reads every head's
// rows of a chunk (decode_chunk_all_heads); a batch of two tells the entries' partials apart.
TEST(FusedSdpa, FewRowsAgainstStridedKeysAreTheContiguousCallsBits) {
  const int64_t heads = 4, d = 64;
  for (const auto& [batch, tk] : {std::pair<int64_t, int64_t>{1, 1100}, {2, 4500}}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", keys " + std::to_string(tk));
    const Tensor q = rand_normal({batch, heads, 2, d}, 31);
    const Tensor packed_k = rand_normal({batch, tk, heads, d}, 32),
                 packed_v = rand_normal({batch, tk, heads, d}, 33);
    // (B, H, Tk, d) views of the packed (B, Tk, H, d) rows.
    const auto heads_of = [&](const Tensor& packed) {
      return packed.as_strided({batch, heads, tk, d}, {tk * heads * d, d, heads * d, 1});
    };
    const Tensor k = heads_of(packed_k), v = heads_of(packed_v);
    ASSERT_FALSE(k.is_contiguous());
    SdpaOptions o;
    o.causal = true;
    const SdpaResult strided = sdpa(q, k, v, o),
                     copied = sdpa(q, k.contiguous(), v.contiguous(), o);
    EXPECT_TRUE(BitwiseEqual(strided.output, copied.output));
    EXPECT_TRUE(BitwiseEqual(strided.logsumexp, copied.logsumexp));
    EXPECT_TRUE(testing::AllClose(strided.output, reference::sdpa(q, k, v, o).output, 2e-5));
    Tensor bad_v = packed_v.clone();
    bad_v.at({batch - 1, 700, 2, 5}) = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(q, k, heads_of(bad_v), o); }, "v holds"));
  }
}

TEST(FusedSdpa, RowsThatSeeNoKeyAreZeroWithInfiniteLogsumexp) {
  // Tq > Tk with causal: the first Tq − Tk queries sit before every key.
  const Tensor q = rand_normal({1, 100, 16}, 4), k = rand_normal({1, 30, 16}, 5),
               v = rand_normal({1, 30, 16}, 6);
  SdpaOptions o;
  o.causal = true;
  const SdpaResult r = sdpa(q, k, v, o);
  for (int64_t i = 0; i < 70; ++i) {
    for (int64_t c = 0; c < 16; ++c) ASSERT_EQ(r.output.at({0, i, c}), 0.0f);
    ASSERT_EQ(r.logsumexp.at({0, i}), std::numeric_limits<float>::infinity());
  }
  EXPECT_TRUE(std::isfinite(r.logsumexp.at({0, 70})));
  o.causal = false;
  o.key_lengths = {0};  // every key is padding
  for (float x : sdpa(q, k, v, o).output.to_vector()) ASSERT_EQ(x, 0.0f);
}

// Hugging Face masks with float's lowest value. The kernel's softmax runs in base 2, where
// that value times log2 e overflows: a row masked so everywhere must still weigh every key
// equally (as the reference does in base e), and a row with one key left must see it alone.
TEST(FusedSdpa, AdditiveMasksOfFloatsLowestValueStayFinite) {
  const Tensor q = rand_normal({2, 70, 16}, 11), k = rand_normal({2, 90, 16}, 12),
               v = rand_normal({2, 90, 16}, 13);
  Tensor bias({70, 90});
  const float lowest = std::numeric_limits<float>::lowest();
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 90; ++j) bias.at({i, j}) = i % 3 == 0 || j != i ? lowest : 0.0f;
  SdpaOptions o;
  o.mask = Mask::additive(bias);
  const SdpaResult fused = sdpa(q, k, v, o);
  const SdpaResult ref = reference::sdpa(q, k, v, o);
  EXPECT_TRUE(testing::AllClose(fused.output, ref.output, 1e-5));
  for (int64_t c = 0; c < 16; ++c) EXPECT_EQ(fused.output.at({1, 4, c}), v.at({1, 4, c}));
}

TEST(FusedSdpa, HugeScoresNeitherOverflowNorNaN) {
  // Scores of ±1e4: exp of the raw scores would overflow; the running max keeps them finite.
  Tensor q = Tensor::full({1, 3, 1}, 100.0f),
         k = Tensor::from_values({1, 4, 1}, {100, -100, 99.9f, 0});
  const Tensor v = Tensor::from_values({1, 4, 1}, {1, 2, 3, 4});
  SdpaOptions o;
  o.scale = 1.0f;  // scores 1e4, -1e4, 9990, 0
  const SdpaResult fused = sdpa(q, k, v, o);
  const SdpaResult ref = reference::sdpa(q, k, v, o);
  for (float x : fused.output.to_vector()) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(testing::AllClose(fused.output, ref.output, 1e-5));
  EXPECT_NEAR(fused.logsumexp.at({0, 0}), 1e4, 1e-2);
}

TEST(FusedSdpa, LogsumexpIsTheLogOfTheSoftmaxDenominator) {
  const Tensor q = rand_normal({2, 70, 8}, 7), k = rand_normal({2, 90, 8}, 8),
               v = rand_normal({2, 90, 8}, 9);
  SdpaOptions o;
  o.causal = true;
  const SdpaResult r = sdpa(q, k, v, o);
  ASSERT_EQ(r.logsumexp.shape(), (Shape{2, 70}));
  const float scale = 1.0f / std::sqrt(8.0f);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 70; i += 13) {
      double sum = 0.0;
      for (int64_t j = 0; j <= 20 + i; ++j) {  // bottom-right: query i sees keys <= 90 - 70 + i
        double dot = 0.0;
        for (int64_t e = 0; e < 8; ++e) dot += double{q.at({h, i, e})} * k.at({h, j, e});
        sum += std::exp(dot * scale);
      }
      EXPECT_NEAR(r.logsumexp.at({h, i}), std::log(sum), 1e-5) << "head " << h << " row " << i;
    }
  }
}

TEST(FusedSdpa, CausalInvarianceIsBitwise) {
  const Tensor x = rand_normal({2, 150, 32}, 10);
  SdpaOptions o;
  o.causal = true;
  const Tensor before = sdpa(x, x, x, o).output;
  for (int64_t t : {0, 63, 64, 100, 148}) {
    Tensor changed = x.clone();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t p = t + 1; p < 150; ++p)
        for (int64_t c = 0; c < 32; ++c) changed.at({h, p, c}) += 5.0f;
    const Tensor after = sdpa(changed, changed, changed, o).output;
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_TRUE(BitwiseEqual(before.select(h).slice(0, t + 1), after.select(h).slice(0, t + 1)))
          << "t = " << t;
    }
  }
}

TEST(FusedSdpa, ReturnsWeightsOnRequestAndCopiesStridedRows) {
  const Tensor q = rand_normal({5, 6}, 11);
  SdpaOptions o;
  EXPECT_FALSE(sdpa(q, q, q, o).weights.defined());
  o.return_weights = true;
  EXPECT_TRUE(BitwiseEqual(sdpa(q, q, q, o).weights, reference::sdpa(q, q, q, o).weights));
  // A transposed view has a strided last dim: copied before the kernel, same answer.
  const Tensor qt = rand_normal({6, 5}, 12).transpose(0, 1);
  EXPECT_TRUE(testing::AllClose(sdpa(qt, qt, qt).output, reference::sdpa(qt, qt, qt).output, 1e-6));
}

TEST(FusedSdpa, ArgumentErrorsAreTheReferences) {
  const Tensor q = rand_normal({2, 4, 5, 8}, 1), k = rand_normal({2, 3, 6, 8}, 2);
  EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(q, k, k); }, "k/v heads (3) must divide q heads (4)"));
  SdpaOptions o;
  o.key_lengths = {1, 2, 3};
  EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(q, q, q, o); }, "3 key_lengths for a batch of 2"));
  o.key_lengths = {1, 6};
  EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(q, q, q, o); }, "key length 6 outside [0, Tk = 5]"));
  o.key_lengths.clear();
  o.key_starts = {0};
  EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(q, q, q, o); }, "1 key_starts for a batch of 2"));
  o.key_starts = {-1, 2};
  EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(q, q, q, o); }, "key start -1 outside [0, Tk = 5]"));
}

// Left padding as Hugging Face builds it for generation: each prompt ends at the last key, the
// entry's first keys are padding. Causal with key_starts equals the dense mask (causal and
// "key >= start") the fused kernel would otherwise read; the queries before the first real key
// see nothing (zeros, logsumexp +inf); starts inside and on the edges of a 128-key block.
TEST(FusedSdpa, KeyStartsAreTheLeftPaddingMask) {
  const int64_t t = 300;
  const Tensor q = rand_normal({3, 2, t, 16}, 21), k = rand_normal({3, 2, t, 16}, 22),
               v = rand_normal({3, 2, t, 16}, 23);
  SdpaOptions padded;
  padded.causal = true;
  padded.key_starts = {0, 128, 200};
  Tensor allow({3, 1, t, t});
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j)
        allow.at({b, 0, i, j}) = j <= i && j >= padded.key_starts[static_cast<size_t>(b)] ? 1 : 0;
  SdpaOptions dense;
  dense.mask = Mask::allow(allow);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const SdpaResult got = sdpa(q, k, v, padded), want = sdpa(q, k, v, dense);
    EXPECT_TRUE(testing::AllClose(got.output, want.output, 1e-6)) << threads << " threads";
    EXPECT_TRUE(testing::AllClose(got.output, reference::sdpa(q, k, v, padded).output, 1e-5));
    for (int64_t i = 0; i < 200; ++i) {
      ASSERT_EQ(got.output.at({2, 1, i, 5}), 0.0f) << i;
      ASSERT_EQ(got.logsumexp.at({2, 1, i}), std::numeric_limits<float>::infinity()) << i;
    }
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

// Finite inputs whose scores leave float32's range: an error, never NaN weights or an output of
// zeros passed on (#22: q = k = 3e38 exited 0 with NaN weights and zeros).
TEST(FusedSdpa, ScoresBeyondFloat32AreAnErrorNotNaN) {
  const Tensor big = Tensor::full({1, 2, 3, 4}, 3e38f);
  Tensor negative = Tensor::full({1, 2, 3, 4}, -3e38f);
  for (const Tensor& k : {big, negative}) {
    EXPECT_TRUE(testing::ThrowsWith([&] { sdpa(big, k, big); }, "overflow float32"));
  }
  // Rows that see no key by construction are still zeros, not an error.
  SdpaOptions o;
  o.causal = true;
  const Tensor q = rand_normal({1, 1, 5, 4}, 1), kv = rand_normal({1, 1, 2, 4}, 2);
  const SdpaResult r = sdpa(q, kv, kv, o);  // bottom-right: queries 0..2 see nothing
  EXPECT_EQ(r.output.at({0, 0, 0, 0}), 0.0f);
  o.causal_align = CausalAlign::kTopLeft;
  o.window = 1;  // top-left, window 1: queries 2.. sit past every key
  EXPECT_NO_THROW(sdpa(q, kv, kv, o));
}

}  // namespace
}  // namespace attn
