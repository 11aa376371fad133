// attn::sdpa_bfloat16 and sdpa_backward_bfloat16 (attn/sdpa_bfloat16.hpp) against their
// definition: sdpa and sdpa_backward on the same values widened to float32 with bf16 products,
// the forward's output rounded to bfloat16 — bit for bit, output and logsumexp, every gradient
// (the sinks' and the additive mask's too, and dQ, dK, dV written as bfloat16: those rounded)
// in both backward loop orders, on each engine of the bf16
// products this CPU has (AMX tiles and vdpbf16ps read the words in place; the vector kernels take
// the widened route), over the shapes and rules the kernels take: GQA, Tq ≠ Tk and both causal
// alignments, widths that need padding, ranks 2 and 3, strided views, windows, key lengths and
// starts, both mask kinds, the score variants and a negative scale. Then its errors: non-finite
// inputs named, bad views, return_weights.
#include "attn/sdpa_bfloat16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attn/bfloat16.hpp"
#include "attn/error.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "bf16_engines.hpp"
#include "gradient_checks.hpp"
#include "src/core/simd_cap.hpp"
#include "test_util.hpp"

namespace attn {
namespace sdpa_bfloat16_test {  // its own names: the sanitizer builds compile tests in unity
                                // batches
namespace {

using testing::Bf16Engine;
using testing::BitwiseEqual;
using testing::LoopOrder;
using testing::ThrowsWith;
using testing::with_bf16_engine;

// bfloat16 values in memory the test owns, seen through a view: (B, H, T, width) as given, or
// with `interleaved` stored (B, T, H, width) as a projection writes them (rows H·width apart).
struct Words {
  std::vector<uint16_t> storage;
  Bfloat16View view;
  Tensor as_float;  // the same values, contiguous float32

  Words(const Shape& shape, uint64_t seed, bool interleaved = false) {
    const Tensor x = rand_normal(shape, seed);
    storage.resize(static_cast<size_t>(x.numel()));
    view.shape = shape;
    view.strides = x.strides();
    if (interleaved) {  // rank 4: (B, H, T, w) over (B, T, H, w) storage
      const int64_t h = shape[1], t = shape[2], w = shape[3];
      view.strides = {h * t * w, w, h * w, 1};
    }
    as_float = Tensor::uninitialized(shape);
    const std::vector<float> values = x.to_vector();
    for (size_t i = 0; i < values.size(); ++i) {
      // Element i of the contiguous order, stored where the view's strides put it.
      int64_t rest = static_cast<int64_t>(i), at = 0;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        at += rest % shape[static_cast<size_t>(d)] * view.strides[static_cast<size_t>(d)];
        rest /= shape[static_cast<size_t>(d)];
      }
      storage[static_cast<size_t>(at)] = to_bfloat16(values[i]);
      as_float.data()[i] = from_bfloat16(storage[static_cast<size_t>(at)]);
    }
    view.data = storage.data();
  }
};

struct Case {
  std::string name;
  Shape q, k, v;
  SdpaOptions options;
  bool interleaved = false;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  SdpaOptions full, causal;
  causal.causal = true;
  all.push_back({"full", {1, 2, 150, 64}, {1, 2, 150, 64}, {1, 2, 150, 64}, full});
  all.push_back({"causal", {2, 2, 300, 64}, {2, 2, 300, 64}, {2, 2, 300, 64}, causal});
  all.push_back({"GQA", {1, 4, 130, 64}, {1, 2, 130, 64}, {1, 2, 130, 64}, causal});
  all.push_back({"d 40, dv 24", {1, 2, 77, 40}, {1, 2, 77, 40}, {1, 2, 77, 24}, causal});
  all.push_back({"d 128", {1, 2, 96, 128}, {1, 1, 96, 128}, {1, 1, 96, 128}, causal});
  all.push_back({"rank 3", {2, 70, 64}, {2, 90, 64}, {2, 90, 64}, causal});
  all.push_back({"rank 2", {33, 32}, {33, 32}, {33, 32}, full});
  all.push_back(
      {"interleaved views", {1, 3, 140, 64}, {1, 3, 140, 64}, {1, 3, 140, 64}, causal, true});
  all.push_back(
      {"Tq < Tk, bottom-right", {1, 2, 50, 64}, {1, 2, 333, 64}, {1, 2, 333, 64}, causal});
  SdpaOptions top_left = causal;
  top_left.causal_align = CausalAlign::kTopLeft;
  all.push_back({"Tq < Tk, top-left", {1, 2, 50, 64}, {1, 2, 333, 64}, {1, 2, 333, 64}, top_left});
  SdpaOptions window = causal;
  window.window = 40;
  all.push_back({"window", {1, 2, 260, 64}, {1, 2, 260, 64}, {1, 2, 260, 64}, window});
  SdpaOptions padded;
  padded.key_lengths = {150, 37};
  padded.key_starts = {0, 5};
  all.push_back(
      {"key lengths and starts", {2, 2, 60, 64}, {2, 2, 150, 64}, {2, 2, 150, 64}, padded});
  SdpaOptions allowed;
  Tensor allow = rand_uniform({1, 1, 90, 90}, 11);
  for (int64_t i = 0; i < allow.numel(); ++i)
    allow.data()[i] = allow.data()[i] < 0.7f ? 1.0f : 0.0f;
  allowed.mask = Mask::allow(allow);
  all.push_back({"boolean mask", {1, 2, 90, 64}, {1, 2, 90, 64}, {1, 2, 90, 64}, allowed});
  SdpaOptions additive;
  additive.mask = Mask::additive(rand_normal({1, 2, 90, 90}, 12));
  additive.return_mask_gradient = true;  // the backward's (the forward ignores it)
  all.push_back({"additive mask", {1, 2, 90, 64}, {1, 2, 90, 64}, {1, 2, 90, 64}, additive});
  SdpaOptions variants = causal;
  variants.softcap = 5.0f;
  variants.alibi_slopes = {0.5f, 0.0625f};
  variants.sinks = {1.5f, -0.5f};
  all.push_back(
      {"softcap, ALiBi, sinks", {1, 2, 140, 64}, {1, 2, 140, 64}, {1, 2, 140, 64}, variants});
  SdpaOptions negative_scale = causal;
  negative_scale.scale = -0.125f;
  all.push_back(
      {"negative scale", {1, 2, 140, 64}, {1, 2, 140, 64}, {1, 2, 140, 64}, negative_scale});
  return all;
}

class SdpaBfloat16 : public ::testing::TestWithParam<Bf16Engine> {
 protected:
  void SetUp() override {
    const std::string missing = bf16_engine_missing(GetParam());
    if (!missing.empty())
      GTEST_SKIP() << missing << "; the widened route runs under the Vector parameter";
  }
};

TEST_P(SdpaBfloat16, IsSdpaOnTheWidenedValuesRoundedBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Words q(c.q, 1, c.interleaved), k(c.k, 2, c.interleaved), v(c.v, 3, c.interleaved);
    Shape out_shape = c.q;
    out_shape.back() = c.v.back();
    std::vector<uint16_t> out(static_cast<size_t>(Tensor(out_shape).numel()), 0xFFFF);
    SdpaOptions expected_options = c.options;
    expected_options.precision = Dtype::kBFloat16;
    SdpaResult expected;
    Tensor logsumexp;
    with_bf16_engine(GetParam(), [&] {
      expected = sdpa(q.as_float, k.as_float, v.as_float, expected_options);
      logsumexp = sdpa_bfloat16(q.view, k.view, v.view, out.data(), c.options);
    });
    Tensor got = Tensor::uninitialized(out_shape), rounded = Tensor::uninitialized(out_shape);
    for (int64_t i = 0; i < got.numel(); ++i) {
      got.data()[i] = from_bfloat16(out[static_cast<size_t>(i)]);
      rounded.data()[i] = from_bfloat16(to_bfloat16(expected.output.data()[i]));
    }
    EXPECT_TRUE(BitwiseEqual(got, rounded));
    EXPECT_TRUE(BitwiseEqual(logsumexp, expected.logsumexp));
  }
}

// Whether float gradients rounded to bfloat16 are `words`, element for element.
bool RoundsTo(const Tensor& floats, const std::vector<uint16_t>& words) {
  const Tensor dense = floats.contiguous();
  for (size_t i = 0; i < words.size(); ++i) {
    if (to_bfloat16(dense.data()[i]) != words[i]) {
      ADD_FAILURE() << "element " << i << ": " << dense.data()[i] << " rounds to "
                    << to_bfloat16(dense.data()[i]) << ", got the word " << words[i];
      return false;
    }
  }
  return true;
}

// And the entry that writes bfloat16 gradients (dK and dV rounded from the kernel's
// accumulators, dQ from its float32 rows once complete) gives those rounded, bit for bit.
TEST_P(SdpaBfloat16, GradientsAreSdpaBackwardsOnTheWidenedValuesBitForBit) {
  for (LoopOrder::Kind order : {LoopOrder::kOneTaskPerHead, LoopOrder::kTwoPasses}) {
    const LoopOrder loop_order(order);
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name + (order == LoopOrder::kTwoPasses ? ", two passes" : ", per head"));
      const Words q(c.q, 1, c.interleaved), k(c.k, 2, c.interleaved), v(c.v, 3, c.interleaved);
      Shape out_shape = c.q;
      out_shape.back() = c.v.back();
      const Words d_out(out_shape, 4);
      Words out(out_shape, 5);  // overwritten with the forward's output
      SdpaOptions expected_options = c.options;
      expected_options.precision = Dtype::kBFloat16;
      std::vector<uint16_t> dq(q.storage.size(), 0xFFFF), dk(k.storage.size(), 0xFFFF),
          dv(v.storage.size(), 0xFFFF);  // NaN words: every element must be written
      SdpaGradients got, expected, as_words;
      with_bf16_engine(GetParam(), [&] {
        const Tensor lse = sdpa_bfloat16(q.view, k.view, v.view, out.storage.data(), c.options);
        for (int64_t i = 0; i < out.as_float.numel(); ++i)
          out.as_float.data()[i] = from_bfloat16(out.storage[static_cast<size_t>(i)]);
        got = sdpa_backward_bfloat16(q.view, k.view, v.view, out.view, d_out.view, lse, c.options);
        expected = sdpa_backward(q.as_float, k.as_float, v.as_float, out.as_float, lse,
                                 d_out.as_float, expected_options);
        as_words = sdpa_backward_bfloat16(q.view, k.view, v.view, out.view, d_out.view, lse,
                                          c.options, {dq.data(), dk.data(), dv.data()});
      });
      EXPECT_TRUE(BitwiseEqual(got.dq, expected.dq));
      EXPECT_TRUE(BitwiseEqual(got.dk, expected.dk));
      EXPECT_TRUE(BitwiseEqual(got.dv, expected.dv));
      EXPECT_TRUE(RoundsTo(got.dq, dq) && RoundsTo(got.dk, dk) && RoundsTo(got.dv, dv));
      EXPECT_FALSE(as_words.dq.defined() || as_words.dk.defined() || as_words.dv.defined());
      ASSERT_EQ(got.dsinks.defined(), !c.options.sinks.empty());
      ASSERT_EQ(as_words.dsinks.defined(), !c.options.sinks.empty());
      if (got.dsinks.defined()) {
        EXPECT_TRUE(BitwiseEqual(got.dsinks, expected.dsinks));
        EXPECT_TRUE(BitwiseEqual(as_words.dsinks, expected.dsinks));
      }
      ASSERT_EQ(got.dmask.defined(), c.options.return_mask_gradient);
      ASSERT_EQ(as_words.dmask.defined(), c.options.return_mask_gradient);
      if (got.dmask.defined()) {
        EXPECT_TRUE(BitwiseEqual(got.dmask, expected.dmask));
        EXPECT_TRUE(BitwiseEqual(as_words.dmask, expected.dmask));
      }
    }
  }
}

TEST_P(SdpaBfloat16, NamesTheInputThatHoldsNaNOrInfinity) {
  for (const char* name : {"q", "k", "v"}) {
    const float bad = std::string(name) == "k" ? std::numeric_limits<float>::quiet_NaN()
                                               : std::numeric_limits<float>::infinity();
    Words q({1, 2, 40, 64}, 1), k({1, 2, 40, 64}, 2), v({1, 2, 40, 64}, 3);
    Words& target = std::string(name) == "q" ? q : std::string(name) == "k" ? k : v;
    target.storage[1234] = to_bfloat16(bad);
    std::vector<uint16_t> out(static_cast<size_t>(2 * 40 * 64));
    SdpaOptions causal;
    causal.causal = true;
    with_bf16_engine(GetParam(), [&] {
      EXPECT_TRUE(ThrowsWith([&] { sdpa_bfloat16(q.view, k.view, v.view, out.data(), causal); },
                             std::string("sdpa: ") + name + " holds"));
    });
  }
}

TEST_P(SdpaBfloat16, TheBackwardNamesTheInputThatHoldsNaNOrInfinity) {
  for (const char* name : {"q", "v", "out", "d_out"}) {
    Words q({1, 2, 40, 64}, 1), k({1, 2, 40, 64}, 2), v({1, 2, 40, 64}, 3), out({1, 2, 40, 64}, 4),
        d_out({1, 2, 40, 64}, 5);
    const std::string which = name;
    Words& target = which == "q" ? q : which == "v" ? v : which == "out" ? out : d_out;
    target.storage[2000] = to_bfloat16(std::numeric_limits<float>::quiet_NaN());
    const Tensor lse = Tensor::full({1, 2, 40}, 1.0f);
    with_bf16_engine(GetParam(), [&] {
      EXPECT_TRUE(ThrowsWith(
          [&] { sdpa_backward_bfloat16(q.view, k.view, v.view, out.view, d_out.view, lse); },
          "sdpa_backward: " + which + " holds"));
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, SdpaBfloat16,
                         ::testing::Values(Bf16Engine::kAmx, Bf16Engine::kDpbf16,
                                           Bf16Engine::kVector),
                         [](const ::testing::TestParamInfo<Bf16Engine>& info) {
                           return testing::param_name(info.param);
                         });

TEST(SdpaBfloat16Errors, RefusesBadViewsAndTheWeights) {
  Words q({1, 2, 8, 16}, 1), k({1, 2, 8, 16}, 2), v({1, 2, 8, 16}, 3);
  std::vector<uint16_t> out(2 * 8 * 16);
  SdpaOptions weights;
  weights.return_weights = true;
  EXPECT_TRUE(ThrowsWith([&] { sdpa_bfloat16(q.view, k.view, v.view, out.data(), weights); },
                         "return_weights"));
  Bfloat16View strided = q.view;
  strided.strides.back() = 2;
  EXPECT_TRUE(ThrowsWith([&] { sdpa_bfloat16(strided, k.view, v.view, out.data()); },
                         "last dim must be contiguous"));
  Bfloat16View missing = k.view;
  missing.data = nullptr;
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_bfloat16(q.view, missing, v.view, out.data()); }, "k has no data"));
  Bfloat16View no_strides = v.view;
  no_strides.strides.pop_back();
  EXPECT_TRUE(ThrowsWith([&] { sdpa_bfloat16(q.view, k.view, no_strides, out.data()); },
                         "one stride per dim"));
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_bfloat16(q.view, k.view, v.view, nullptr); }, "out has no data"));
  const Tensor lse = Tensor::full({1, 2, 8}, 1.0f);
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_backward_bfloat16(q.view, k.view, v.view, q.view, strided, lse); },
                 "sdpa_backward_bfloat16: d_out's last dim must be contiguous"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_backward_bfloat16(q.view, k.view, v.view, q.view, q.view, Tensor::full({2, 8}, 1.0f));
      },
      "logsumexp must be"));
  Words wide({1, 2, 8, 32}, 4);
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_backward_bfloat16(q.view, k.view, v.view, wide.view, q.view, lse); },
                 "out must be"));
  EXPECT_TRUE(
      ThrowsWith([&] { sdpa_bfloat16(q.view, wide.view, v.view, out.data()); }, "k's last dim"));
  std::vector<uint16_t> dq(2 * 8 * 16), dk(dq.size());
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sdpa_backward_bfloat16(q.view, k.view, v.view, q.view, q.view, lse, {},
                               {dq.data(), dk.data(), nullptr});
      },
      "need dq, dk and dv to write into"));
}

}  // namespace
}  // namespace sdpa_bfloat16_test
}  // namespace attn
