// The KV cache and cached decoding: token by token equals one causal pass over the whole
// sequence; the sliding-window ring equals the sliding-window mask; GQA through the cache
// equals the reference with repeated K/V heads; bf16 storage within its stated bound, and equal
// to f32 storage (to 1e-5) where the values are bf16 already; RoPE's relative-position
// property; thread-count independence; the errors.
#include "attn/kv_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "attn/embedding.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/threads.hpp"
#include "simd_targets.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::AllClose;
using testing::causal;
using testing::ThrowsWith;

// Runs x through the layer in steps of `step` new tokens; returns (B, T, d_model).
Tensor run_in_steps(const MultiHeadAttention& layer, const Tensor& x, KVCache& cache,
                    int64_t step) {
  Tensor y(x.shape());
  for (int64_t t0 = 0; t0 < x.dim(1); t0 += step) {
    const int64_t n = std::min(step, x.dim(1) - t0);
    const Tensor chunk = x.transpose(0, 1).slice(t0, n).transpose(0, 1).contiguous();
    const Tensor out = layer.forward(chunk, cache);
    y.transpose(0, 1).slice(t0, n).copy_from(out.transpose(0, 1));
  }
  return y;
}

struct LayerCase {
  int64_t heads, kv_heads;
  bool rope, bias;
};

class CachedDecoding : public ::testing::TestWithParam<LayerCase> {};

TEST_P(CachedDecoding, TokenByTokenEqualsOneCausalPass) {
  const LayerCase c = GetParam();
  MhaConfig config;
  config.d_model = 64;
  config.n_heads = c.heads;
  config.n_kv_heads = c.kv_heads;
  config.rope = c.rope;
  config.bias = c.bias;
  config.seed = 3;
  MultiHeadAttention layer(config);
  if (c.bias) {
    layer.bqkv = rand_normal(layer.bqkv.shape(), 9, 0.0f, 0.1f);
    layer.bo = rand_normal(layer.bo.shape(), 10, 0.0f, 0.1f);
  }
  const Tensor x = rand_normal({2, 600, 64}, 4);
  const Tensor full = layer.forward(x, causal());
  for (int64_t step : {1, 7, 16}) {
    KVCache cache = layer.make_cache(2, 600);
    EXPECT_TRUE(AllClose(run_in_steps(layer, x, cache, step), full, 1e-5)) << "step " << step;
    EXPECT_EQ(cache.position(), 600);
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, CachedDecoding,
                         ::testing::Values(LayerCase{4, 4, false, false},
                                           LayerCase{8, 2, false, true},
                                           LayerCase{4, 1, true, false},
                                           LayerCase{8, 4, true, true}));

TEST(KVCache, SlidingWindowRingEqualsTheWindowMask) {
  MhaConfig config;
  config.d_model = 32;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.rope = true;
  MultiHeadAttention layer(config);
  const Tensor x = rand_normal({1, 700, 32}, 5);
  SdpaOptions window;
  window.window = 100;
  const Tensor full = layer.forward(x, window);
  for (int64_t step : {1, 5}) {
    KVCache ring = layer.make_cache(1, 0, Dtype::kFloat32, 100);  // capacity 100 + 15
    EXPECT_EQ(ring.capacity(), 115);
    EXPECT_TRUE(AllClose(run_in_steps(layer, x, ring, step), full, 1e-5)) << "step " << step;
    EXPECT_EQ(ring.size(), 115);  // bounded however long the sequence
    EXPECT_EQ(ring.position(), 700);
  }
}

TEST(KVCache, GroupedQueryMatchesTheReferenceWithRepeatedHeads) {
  KVCacheConfig c;
  c.batch = 2;
  c.n_kv_heads = 2;
  c.head_dim = 40;
  c.capacity = 1500;
  KVCache cache(c);
  const Tensor k = rand_normal({2, 2, 1300, 40}, 6), v = rand_normal({2, 2, 1300, 40}, 7);
  cache.append(k, v);
  const Tensor q = rand_normal({2, 8, 3, 40}, 8);  // 3 new queries, 4 query heads per K/V head
  const SdpaResult cached = attend_cached(q, cache);
  Tensor k_rep({2, 8, 1300, 40}), v_rep({2, 8, 1300, 40});
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 8; ++h) {
      k_rep.select(b).select(h).copy_from(k.select(b).select(h / 4));
      v_rep.select(b).select(h).copy_from(v.select(b).select(h / 4));
    }
  }
  const SdpaResult ref = reference::sdpa(q, k_rep, v_rep, causal());  // bottom-right aligned
  EXPECT_TRUE(AllClose(cached.output, ref.output, 1e-5));
  EXPECT_TRUE(AllClose(cached.logsumexp, sdpa(q, k_rep, v_rep, causal()).logsumexp, 1e-4));
}

TEST(KVCache, Bfloat16StorageStaysWithinItsBound) {
  // bf16 keeps 8 significant bits: each stored value is within 2^-9 relative. The stated bound
  // for the attention output is 1e-2 · max|V| (errors in K move the weights, errors in V the
  // average).
  KVCacheConfig c;
  c.batch = 1;
  c.n_kv_heads = 4;
  c.head_dim = 64;
  c.capacity = 2000;
  KVCache f32(c);
  c.dtype = Dtype::kBFloat16;
  KVCache bf16(c);
  const Tensor k = rand_normal({1, 4, 2000, 64}, 9), v = rand_normal({1, 4, 2000, 64}, 10);
  f32.append(k, v);
  bf16.append(k, v);
  const Tensor q = rand_normal({1, 8, 1, 64}, 11);
  float v_max = 0.0f;
  for (float x : v.to_vector()) v_max = std::max(v_max, std::fabs(x));
  EXPECT_TRUE(AllClose(attend_cached(q, bf16).output, attend_cached(q, f32).output, 1e-2 * v_max));
}

// Widening bf16 to float is exact, so a bf16 cache and an f32 cache holding the same
// bf16-representable values may differ only by rounding in the sums (far tighter than the
// 1e-2 bound above, which is about bf16's rounding of the values). Head dims from 8 to 128
// cover the kernel's row widths (1, 2, 4 and 8 vectors in registers, and the loop for any
// other), with several query rows, GQA, and a window whose ring wraps.
TEST(KVCache, Bfloat16CacheEqualsFloatCacheOfTheSameValues) {
  for (int64_t d : {8, 16, 24, 32, 40, 48, 64, 96, 128}) {
    KVCacheConfig c;
    c.n_kv_heads = 2;
    c.head_dim = d;
    c.window = 300;
    c.capacity = 320;
    KVCache f32(c);
    c.dtype = Dtype::kBFloat16;
    KVCache bf16(c);
    auto rounded = [](Tensor t) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = from_bfloat16(to_bfloat16(t.data()[i]));
      return t;
    };
    for (int64_t step = 0; step < 3; ++step) {  // 3 × 150 positions: the ring wraps
      const Tensor k = rounded(rand_normal({1, 2, 150, d}, 40 + step));
      const Tensor v = rounded(rand_normal({1, 2, 150, d}, 50 + step));
      f32.append(k, v);
      bf16.append(k, v);
    }
    const Tensor q = rand_normal({1, 4, 3, d}, 60);  // 3 new queries, 2 query heads per K/V head
    EXPECT_TRUE(AllClose(attend_cached(q, bf16).output, attend_cached(q, f32).output, 1e-5))
        << "d = " << d;
  }
}

TEST(KVCache, BfloatConversionRoundsToNearestEven) {
  EXPECT_EQ(from_bfloat16(to_bfloat16(1.0f)), 1.0f);
  // bf16 keeps 7 fraction bits: next to 1.0 the spacing is 2^-7.
  EXPECT_EQ(from_bfloat16(to_bfloat16(1.0f + 0x1p-9f)), 1.0f);                       // below half
  EXPECT_EQ(from_bfloat16(to_bfloat16(1.0f + 0x1p-8f + 0x1p-10f)), 1.0f + 0x1p-7f);  // above half
  EXPECT_EQ(from_bfloat16(to_bfloat16(1.0f + 0x1p-8f)), 1.0f);                       // tie: to even
  EXPECT_EQ(from_bfloat16(to_bfloat16(1.0f + 0x1p-7f + 0x1p-8f)), 1.0f + 0x1p-6f);   // tie: to even
  EXPECT_TRUE(std::isnan(from_bfloat16(to_bfloat16(std::nanf("")))));
  EXPECT_EQ(from_bfloat16(to_bfloat16(-3.5f)), -3.5f);
}

// The value each storage keeps of x, by the rules attn/kv_cache.hpp states, written out plainly:
// the oracle of the vectorised stores.
float stored_by_rule(Dtype storage, const std::vector<float>& row, int64_t e) {
  if (storage == Dtype::kFloat32) return row[static_cast<size_t>(e)];
  if (storage == Dtype::kBFloat16) return from_bfloat16(to_bfloat16(row[static_cast<size_t>(e)]));
  float largest = 0.0f;
  for (float x : row) largest = std::max(largest, std::fabs(x));
  if (largest < 1e-36f) return 0.0f;
  const float scale = from_bfloat16(to_bfloat16(largest / 127.0f));  // stored as bfloat16
  const float q = std::nearbyint(row[static_cast<size_t>(e)] * (1.0f / scale));
  return scale * std::clamp(q, -127.0f, 127.0f);
}

// Every stored element equals the rule's, exactly: each storage, head dims with and without a
// vector tail, K and V from views whose rows are apart (as a layer's projections give them) and
// from one whose last dim is strided, appends of several rows into a ring that wraps, rows of
// zeros, of values below q8's 1e-36 and of q8's ties (to even), on every SIMD target and both
// thread counts.
TEST(KVCache, AppendStoresEveryValueByItsStorageRule) {
  testing::for_each_simd_target([](const char* target) {
    for (Dtype storage : {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kQ8}) {
      for (int64_t d : {5, 16, 20, 64, 72}) {
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          KVCacheConfig c;
          c.batch = 2;
          c.n_kv_heads = 3;
          c.head_dim = d;
          c.window = 7;
          c.capacity = 9;
          c.dtype = storage;
          KVCache cache(c);
          int64_t seed = 70;
          for (int64_t t_new : {4, 6, 1, 9}) {  // slots 0-3, 4-8 and 0, 1, 2-8 and 0-1
            // (B, T, H, d) storage seen as (B, H, T, d); V's last dim strided.
            Tensor k = rand_normal({2, t_new, 3, d}, seed++, 0.0f, 4.0f).permute({0, 2, 1, 3});
            Tensor v = rand_normal({2, 3, d, t_new}, seed++).transpose(2, 3);
            for (int64_t e = 0; e < d; ++e) k.at({0, 1, 0, e}) = 0.0f;  // zeros
            for (int64_t e = 0; e < d; ++e) k.at({1, 2, t_new - 1, e}) = 1e-37f * float(e + 1);
            for (int64_t e = 0; e < d; ++e)  // largest 127: x itself rounded, ties among them
              v.at({1, 0, 0, e}) = e == 0 ? 127.0f : 0.5f + float(e % 5) - 2.0f;
            cache.append(k, v);
            for (int64_t b = 0; b < 2; ++b)
              for (int64_t h = 0; h < 3; ++h)
                for (int64_t t = 0; t < t_new; ++t) {
                  std::vector<float> k_row, v_row;
                  for (int64_t e = 0; e < d; ++e) {
                    k_row.push_back(k.at({b, h, t, e}));
                    v_row.push_back(v.at({b, h, t, e}));
                  }
                  const int64_t p = cache.position() - t_new + t;
                  for (int64_t e = 0; e < d; ++e) {
                    ASSERT_EQ(cache.key_at(b, h, p, e), stored_by_rule(storage, k_row, e))
                        << target << " " << to_string(storage) << " d " << d << " (" << b << ", "
                        << h << ", " << p << ", " << e << ")";
                    ASSERT_EQ(cache.value_at(b, h, p, e), stored_by_rule(storage, v_row, e))
                        << target << " " << to_string(storage) << " d " << d << " (" << b << ", "
                        << h << ", " << p << ", " << e << ")";
                  }
                }
          }
        }
      }
    }
    set_num_threads(0);
  });
}

TEST(KVCache, ResultsDoNotDependOnTheThreadCount) {
  for (Dtype storage : {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kQ8}) {
    KVCacheConfig c;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.capacity = 5000;
    c.dtype = storage;
    KVCache cache(c);
    cache.append(rand_normal({1, 2, 5000, 64}, 12), rand_normal({1, 2, 5000, 64}, 13));
    const Tensor q = rand_normal({1, 4, 2, 64}, 14);
    set_num_threads(1);
    const Tensor one = attend_cached(q, cache).output;
    set_num_threads(2);
    const Tensor two = attend_cached(q, cache).output;
    set_num_threads(0);
    EXPECT_TRUE(testing::BitwiseEqual(one, two)) << to_string(storage);
  }
}

TEST(Rope, ScoresDependOnlyOnTheDistance) {
  const Tensor q = rand_normal({1, 32}, 15), k = rand_normal({1, 32}, 16);
  auto score = [&](int64_t m, int64_t n) {
    Tensor qm = q.clone(), kn = k.clone();
    apply_rope(qm, m);
    apply_rope(kn, n);
    double dot = 0;
    for (int64_t e = 0; e < 32; ++e) dot += double{qm.at({0, e})} * kn.at({0, e});
    return dot;
  };
  for (int64_t shift : {1, 17, 1000}) {
    EXPECT_NEAR(score(10, 3), score(10 + shift, 3 + shift), 1e-4) << shift;
    EXPECT_NEAR(score(3, 10), score(3 + shift, 10 + shift), 1e-4) << shift;
  }
  EXPECT_GT(std::fabs(score(10, 3) - score(10, 4)), 1e-3);  // it does depend on the distance
  Tensor at_zero = q.clone();
  apply_rope(at_zero, 0);
  EXPECT_TRUE(testing::BitwiseEqual(at_zero, q));  // position 0: no rotation
  Tensor odd({2, 3});
  EXPECT_TRUE(ThrowsWith([&] { apply_rope(odd, 0); }, "must be even"));
}

// Sizes whose product passes int64 used to wrap to a small buffer that decoding then overran
// (capacity 2^60 + 1 with head_dim 16 wraps to 16 floats). Each is refused before allocating.
TEST(KVCache, SizesThatWouldWrapOrExhaustMemoryAreRefused) {
  const int64_t big = int64_t{1} << 31;
  const std::vector<std::array<int64_t, 4>> sizes = {
      // batch, n_kv_heads, capacity, head_dim
      {1, 1, (int64_t{1} << 60) + 1, 16},
      {big, big, big, big},
      {1, 1, std::numeric_limits<int64_t>::max(), 2},
      {int64_t{1} << 62, 4, 1, 1},
      {1, 1 << 20, 1 << 20, 1},  // 2^40 elements: no wrap, but far past the cap
  };
  for (const auto& [batch, heads, capacity, head_dim] : sizes) {
    KVCacheConfig c;
    c.batch = batch;
    c.n_kv_heads = heads;
    c.capacity = capacity;
    c.head_dim = head_dim;
    EXPECT_TRUE(
        ThrowsWith([&] { KVCache{c}; }, "KVCache: batch·n_kv_heads·capacity·head_dim is too large"))
        << batch << " " << heads << " " << capacity << " " << head_dim;
  }
}

TEST(KVCache, Errors) {
  KVCacheConfig c;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.capacity = 10;
  KVCache fixed(c);
  fixed.append(Tensor({1, 2, 8, 8}), Tensor({1, 2, 8, 8}));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        fixed.append(Tensor({1, 2, 3, 8}), Tensor({1, 2, 3, 8}));
      },
      "3 new positions do not fit: 8 of 10 are used"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        fixed.append(Tensor({1, 3, 1, 8}), Tensor({1, 3, 1, 8}));
      },
      "must be (B, H_kv, T_new, d) = (1, 2, 1, 8)"));
  Tensor nan_keys({1, 2, 1, 8});
  nan_keys.at({0, 1, 0, 3}) = std::nanf("");
  EXPECT_TRUE(ThrowsWith([&] { fixed.append(nan_keys, Tensor({1, 2, 1, 8})); }, "non-finite key"));
  EXPECT_EQ(fixed.position(), 8);  // a rejected append changes nothing
  EXPECT_TRUE(ThrowsWith([&] { attend_cached(Tensor({1, 3, 1, 8}), fixed); }, "H a multiple of 2"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        attend_cached(Tensor({1, 2, 9, 8}), fixed);
      },
      "9 queries but the cache holds only 8"));
  SdpaOptions masked;
  masked.mask = Mask::allow(Tensor({1, 8}));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        attend_cached(Tensor({1, 2, 1, 8}), fixed, masked);
      },
      "not supported"));
  c.window = 4;
  c.capacity = 5;
  KVCache ring(c);
  ring.append(Tensor({1, 2, 5, 8}), Tensor({1, 2, 5, 8}));
  ring.append(Tensor({1, 2, 5, 8}), Tensor({1, 2, 5, 8}));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        attend_cached(Tensor({1, 2, 5, 8}), ring);
      },
      "needs capacity >= window + new queries - 1 = 8"));
  // A rejected append leaves a full ring as it was.
  const Tensor q = rand_normal({1, 2, 1, 8}, 17);
  ring.append(rand_normal({1, 2, 5, 8}, 18), rand_normal({1, 2, 5, 8}, 19));
  const Tensor before = attend_cached(q, ring).output;
  Tensor bad_values = rand_normal({1, 2, 3, 8}, 20);
  bad_values.at({0, 1, 2, 7}) = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(ThrowsWith([&] { ring.append(bad_values, bad_values); },
                         "non-finite key or value at (0, 1, 2, 7)"));
  EXPECT_TRUE(testing::BitwiseEqual(attend_cached(q, ring).output, before));
  EXPECT_TRUE(ThrowsWith([] { KVCache(KVCacheConfig{1, 1, 8, 3, 4}); }, "must hold the window"));
  MhaConfig bad;
  bad.n_heads = 4;
  bad.n_kv_heads = 3;
  EXPECT_TRUE(
      ThrowsWith([&] { MultiHeadAttention{bad}; }, "n_kv_heads (3) must divide n_heads (4)"));
  MhaConfig ok;
  MultiHeadAttention layer(ok);
  KVCache wrong = MultiHeadAttention(MhaConfig{64, 8}).make_cache(1, 4);
  EXPECT_TRUE(ThrowsWith(
      [&] {
        layer.forward(Tensor({1, 1, 64}), wrong);
      },
      "the cache holds 8 heads of 8"));
}

}  // namespace
}  // namespace attn
