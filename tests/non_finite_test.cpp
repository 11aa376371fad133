// attn's policy for NaN and ±inf (src/reference/finite.hpp): every public entry that takes float
// values refuses them with an attn::Error naming the argument, rather than passing them on to
// some rows and not others. And the cap on what one call allocates (src/core/memory_limit.hpp):
// a shape past the memory available is refused with a message, before any allocation.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attn/attn.hpp"
#include "attn/mha_reference.hpp"
#include "src/attention/fused.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

constexpr float kNonFiniteNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNonFiniteInf = std::numeric_limits<float>::infinity();

Tensor normal_for_policy(const Shape& shape, uint64_t seed) {
  return rand_normal(shape, seed, 0.0f, 1.0f);
}

// One entry point given inputs in which the argument `argument` holds `bad` at one element.
struct NonFiniteCase {
  std::string entry, argument;
  std::function<void(float bad)> call;
};

// Sets the element in the middle of t (a fresh tensor the case owns) to `bad`.
Tensor with_non_finite(Tensor t, float bad) {
  t.data()[t.numel() / 2] = bad;
  return t;
}

std::vector<NonFiniteCase> non_finite_cases() {
  const Tensor q = normal_for_policy({1, 2, 6, 4}, 1), k = normal_for_policy({1, 2, 6, 4}, 2),
               v = normal_for_policy({1, 2, 6, 4}, 3);
  const SdpaResult forward = sdpa(q, k, v, [] {
    SdpaOptions o;
    o.causal = true;
    return o;
  }());
  const Tensor d_out = normal_for_policy({1, 2, 6, 4}, 4);
  SdpaOptions causal;
  causal.causal = true;
  const Tensor x = normal_for_policy({1, 6, 8}, 5), w = normal_for_policy({8, 8}, 6),
               b = normal_for_policy({8}, 7);
  std::vector<NonFiniteCase> out;
  auto add = [&](std::string entry, std::string argument, std::function<void(float)> call) {
    out.push_back({std::move(entry), std::move(argument), std::move(call)});
  };
  for (const char* name : {"q", "k", "v"}) {
    auto pick = [=](float bad, const Tensor& t, const char* which) {
      return std::string(name) == which ? with_non_finite(t.clone(), bad) : t;
    };
    add("sdpa", name,
        [=](float bad) { sdpa(pick(bad, q, "q"), pick(bad, k, "k"), pick(bad, v, "v"), causal); });
    add("reference::sdpa", name, [=](float bad) {
      reference::sdpa(pick(bad, q, "q"), pick(bad, k, "k"), pick(bad, v, "v"), causal);
    });
    add("sdpa_backward", name, [=](float bad) {
      sdpa_backward(pick(bad, q, "q"), pick(bad, k, "k"), pick(bad, v, "v"), forward.output,
                    forward.logsumexp, d_out, causal);
    });
    add("reference::sdpa_backward", name, [=](float bad) {
      reference::sdpa_backward(pick(bad, q, "q"), pick(bad, k, "k"), pick(bad, v, "v"), d_out,
                               causal);
    });
  }
  add("sdpa_backward", "out", [=](float bad) {
    sdpa_backward(q, k, v, with_non_finite(forward.output.clone(), bad), forward.logsumexp, d_out,
                  causal);
  });
  add("sdpa_backward", "d_out", [=](float bad) {
    sdpa_backward(q, k, v, forward.output, forward.logsumexp, with_non_finite(d_out.clone(), bad),
                  causal);
  });
  add("reference::sdpa_backward", "d_out", [=](float bad) {
    reference::sdpa_backward(q, k, v, with_non_finite(d_out.clone(), bad), causal);
  });
  for (const char* name : {"x", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"}) {
    auto mha_call = [=](float bad, bool fast) {
      auto pick = [&](const Tensor& t, const char* which) {
        return std::string(name) == which ? with_non_finite(t.clone(), bad) : t;
      };
      MhaExtras extras;
      extras.bq = pick(b, "bq");
      extras.bk = pick(b, "bk");
      extras.bv = pick(b, "bv");
      extras.bo = pick(b, "bo");
      const Tensor xs = pick(x, "x"), wq = pick(w, "wq"), wk = pick(w, "wk"), wv = pick(w, "wv"),
                   wo = pick(w, "wo");
      if (fast) {
        multi_head_attention(xs, wq, wk, wv, wo, 2, causal, extras);
      } else {
        reference::multi_head_attention(xs, wq, wk, wv, wo, 2, causal, extras);
      }
    };
    add("multi_head_attention", name, [=](float bad) { mha_call(bad, true); });
    add("multi_head_attention", name, [=](float bad) { mha_call(bad, false); });
  }
  MhaConfig config;
  config.d_model = 8;
  config.n_heads = 2;
  const auto layer = std::make_shared<MultiHeadAttention>(config);
  add("MultiHeadAttention", "x",
      [=](float bad) { layer->forward(with_non_finite(x.clone(), bad), causal); });
  add("MultiHeadAttention", "x", [=](float bad) {
    KVCache cache = layer->make_cache(1, 16);
    layer->forward(with_non_finite(x.clone(), bad), cache);
  });
  add("MultiHeadAttention::backward", "d_y", [=](float bad) {
    MhaActivations saved;
    layer->forward(x, causal, saved);
    layer->backward(saved, with_non_finite(normal_for_policy({1, 6, 8}, 8), bad));
  });
  add("attend_cached", "q", [=](float bad) {
    KVCache cache(KVCacheConfig{1, 2, 4, 16, 0, Dtype::kFloat32});
    cache.append(k, v);
    attend_cached(with_non_finite(q.clone(), bad), cache);
  });
  add("KVCache::append", "", [=](float bad) {
    KVCache cache(KVCacheConfig{1, 2, 4, 16, 0, Dtype::kFloat32});
    cache.append(k, with_non_finite(v.clone(), bad));
  });
  return out;
}

TEST(NonFinitePolicy, EveryEntryRefusesNaNAndInfinityNamingTheArgument) {
  const std::vector<NonFiniteCase> all = non_finite_cases();
  EXPECT_GE(all.size(), 38u);
  for (const NonFiniteCase& c : all) {
    for (const float bad : {kNonFiniteNaN, kNonFiniteInf, -kNonFiniteInf}) {
      SCOPED_TRACE(c.entry + " " + c.argument + " = " + std::to_string(bad));
      try {
        c.call(bad);
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(c.entry), std::string::npos) << message;
        if (!c.argument.empty()) {
          EXPECT_EQ(e.argument(), c.argument) << message;
          EXPECT_NE(message.find("refuses NaN and ±inf"), std::string::npos) << message;
        }
      }
    }
  }
}

TEST(NonFinitePolicy, TheSameFiniteInputsPass) {
  for (const NonFiniteCase& c : non_finite_cases()) {
    SCOPED_TRACE(c.entry + " " + c.argument);
    EXPECT_NO_THROW(c.call(0.5f));
  }
}

// A NaN at every third element of q, k or v in turn, over shapes that split the work in
// different ways: each call must refuse it, naming the tensor.
void forward_finds_nan_anywhere(const SdpaOptions& options) {
  struct Dims {
    int64_t heads, kv_heads, tq, tk;
  };
  for (const Dims s : {Dims{1, 1, 1, 7}, Dims{2, 1, 130, 3}, Dims{4, 2, 70, 200},
                       Dims{3, 3, 64, 64}, Dims{2, 2, 5, 129}}) {
    const Tensor q = normal_for_policy({2, s.heads, s.tq, 4}, 20),
                 k = normal_for_policy({2, s.kv_heads, s.tk, 4}, 21),
                 v = normal_for_policy({2, s.kv_heads, s.tk, 4}, 22);
    for (const char* name : {"q", "k", "v"}) {
      const Tensor& clean = name[0] == 'q' ? q : name[0] == 'k' ? k : v;
      for (int64_t at = 0; at < clean.numel(); at += testing::sweep_step(3)) {
        Tensor bad = clean.clone();
        bad.data()[at] = kNonFiniteNaN;
        const Tensor& tq = name[0] == 'q' ? bad : q;
        const Tensor& tk = name[0] == 'k' ? bad : k;
        const Tensor& tv = name[0] == 'v' ? bad : v;
        try {
          sdpa(tq, tk, tv, options);
          ADD_FAILURE() << name << " NaN at flat " << at << " accepted, heads " << s.heads << "/"
                        << s.kv_heads << ", Tq " << s.tq << ", Tk " << s.tk << ", "
                        << to_string(options.precision);
        } catch (const Error& e) {
          EXPECT_EQ(e.argument(), name);
        }
      }
    }
  }
}

// The fused forward scans its inputs inside its tasks (each task its query rows and a share
// of its K/V head's rows; with bf16 products on AMX tiles, K and V as they are packed): every
// element must be some task's, for any split of the work.
TEST(NonFinitePolicy, TheFusedForwardFindsANaNAnywhere) {
  for (const Dtype precision : {Dtype::kFloat32, Dtype::kBFloat16}) {
    SdpaOptions options;
    options.precision = precision;
    forward_finds_nan_anywhere(options);
  }
}

// -inf at every fifth element of each input of the backward in turn, in both loop orders:
// each call must refuse it, naming the input.
void backward_finds_inf_anywhere(const SdpaOptions& options) {
  for (const int64_t two_pass_below : {int64_t{1}, int64_t{1} << 30}) {
    detail::set_backward_two_pass_below(two_pass_below);
    const Tensor q = normal_for_policy({2, 4, 70, 4}, 30),
                 k = normal_for_policy({2, 2, 150, 4}, 31),
                 v = normal_for_policy({2, 2, 150, 4}, 32),
                 d_out = normal_for_policy({2, 4, 70, 4}, 33);
    const SdpaResult f = sdpa(q, k, v, options);
    const std::vector<std::pair<const char*, Tensor>> inputs{
        {"q", q}, {"k", k}, {"v", v}, {"out", f.output}, {"d_out", d_out}};
    for (const auto& [name, clean] : inputs) {
      for (int64_t at = 0; at < clean.numel(); at += testing::sweep_step(5)) {
        std::vector<Tensor> args;
        for (const auto& [other, tensor] : inputs) args.push_back(tensor);
        Tensor bad = clean.clone();
        bad.data()[at] = -kNonFiniteInf;
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (std::string(inputs[i].first) == name) args[i] = bad;
        }
        try {
          sdpa_backward(args[0], args[1], args[2], args[3], f.logsumexp, args[4], options);
          ADD_FAILURE() << name << " -inf at flat " << at << " accepted, two-pass below "
                        << two_pass_below << ", " << to_string(options.precision);
        } catch (const Error& e) {
          EXPECT_EQ(e.argument(), name);
        }
      }
    }
  }
  detail::set_backward_two_pass_below(0);
}

// The backward's tasks scan what they read, in both of its loop orders (and with bf16
// products on AMX tiles, K and V as they are packed).
TEST(NonFinitePolicy, TheFusedBackwardFindsANaNAnywhere) {
  for (const Dtype precision : {Dtype::kFloat32, Dtype::kBFloat16}) {
    SdpaOptions options;
    options.precision = precision;
    backward_finds_inf_anywhere(options);
  }
}

TEST(NonFinitePolicy, TheMessageNamesTheFirstElementOfAStridedView) {
  Tensor base = normal_for_policy({3, 5, 4}, 9);
  base.at({2, 1, 3}) = kNonFiniteNaN;
  const Tensor view = base.transpose(0, 1);  // (5, 3, 4): the NaN at (1, 2, 3)
  try {
    sdpa(view, view.clone().contiguous(), view.contiguous());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q holds nan at (1, 2, 3)"), std::string::npos)
        << e.what();
  }
}

TEST(NonFinitePolicy, AdditiveMasksMayHoldMinusInfinityOnly) {
  const Tensor q = normal_for_policy({4, 8}, 10);
  Tensor mask = Tensor::zeros({4, 4});
  mask.at({0, 3}) = -kNonFiniteInf;
  SdpaOptions o;
  o.mask = Mask::additive(mask);
  EXPECT_NO_THROW(sdpa(q, q, q, o));
  for (const float bad : {kNonFiniteNaN, kNonFiniteInf}) {
    mask.at({1, 2}) = bad;
    EXPECT_THROW(sdpa(q, q, q, o), Error);
  }
}

// A stride-0 view is cheap to pass and costly to answer: every call that would allocate past
// the machine's available memory says so first. The sizes (TiB) are past any machine's.
TEST(MemoryCap, HugeResultsAreRefusedBeforeAllocating) {
  const Tensor row = normal_for_policy({1, 4}, 11);
  const Tensor many_rows = row.as_strided({int64_t{1} << 38, 4}, {0, 1});  // 4 TiB
  const Tensor keys = normal_for_policy({8, 4}, 12);
  auto expect_refused = [](const std::function<void()>& call, const std::string& start) {
    try {
      call();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(start, 0), 0u) << message;
      EXPECT_NE(message.find("more than this machine has available"), std::string::npos) << message;
    }
  };
  const Tensor wide_keys = keys.select(0).reshape({1, 4}).as_strided({int64_t{1} << 36, 4}, {0, 1});
  expect_refused([&] { sdpa(many_rows, keys, keys); }, "sdpa: the output (274877906944, 4) needs");
  SdpaOptions weights;
  weights.return_weights = true;
  expect_refused([&] { sdpa(keys, wide_keys, wide_keys, weights); },
                 "sdpa: computing the weights (8, 68719476736) needs");
  expect_refused([&] { reference::sdpa(keys, wide_keys, wide_keys); },
                 "reference::sdpa: computing the weights");
  const Tensor x = row.reshape({1, 1, 4}).as_strided({1, int64_t{1} << 36, 4}, {0, 0, 1});
  const Tensor w = normal_for_policy({4, 4}, 13);
  expect_refused([&] { multi_head_attention(x, w, w, w, w, 2); },
                 "multi_head_attention: Q, K and V (1, 68719476736, 12) needs");
  expect_refused(
      [] {
        Tensor({int64_t{1} << 20, int64_t{1} << 20});
      },
      "a tensor (1048576, 1048576) needs 4096.0 GiB");
}

}  // namespace
}  // namespace attn
