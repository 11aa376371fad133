// The GPT: its loss against a double-precision forward written from the formulas, every
// parameter gradient against central differences of that forward, for each position kind,
// GQA, no biases and dropout; thread-count independence; KV-cache decoding against the full
// forward; generation with and without the cache; and the argument errors.
#include "attn/gpt.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "attn/gpt_flops.hpp"
#include "attn/threads.hpp"
#include "gpt_reference.hpp"
#include "src/nn/gpt_internal.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;

// Every position scheme a GptConfig can name: the tests that loop over them share this list,
// so a new scheme is tested by all of them.
constexpr PositionKind kEveryPositionKind[] = {PositionKind::kLearned, PositionKind::kSinusoidal,
                                               PositionKind::kRotary};

GptConfig tiny(PositionKind positions = PositionKind::kLearned) {
  GptConfig c;
  c.vocab_size = 7;
  c.block_size = 6;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.positions = positions;
  return c;
}

struct Batch {
  std::vector<int64_t> ids, targets;
};

Batch random_batch(int64_t batch, int64_t t, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (int64_t i = 0; i < batch * t; ++i) {
    b.ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
    b.targets.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
  }
  return b;
}

// The model's biases and LayerNorm parameters start at 0 and 1; perturb everything so that
// every gradient path is exercised.
void perturb(Gpt& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  float* p = model.parameters().data();
  for (int64_t i = 0; i < model.num_parameters(); ++i) {
    p[i] += 0.1f * (static_cast<float>(rng() >> 40) / 16777216.0f - 0.5f);
  }
}

// Checks the loss and every gradient of `model` on a (2, 5) batch against the double forward.
void check_gradients(Gpt& model, float dropout_seed = 0) {
  const Batch b = random_batch(2, 5, model.config().vocab_size, 11);
  model.zero_grad();
  const float loss = model.forward(b.ids, b.targets, 2, static_cast<uint64_t>(dropout_seed));
  model.backward();
  testing::DoubleGpt reference(model);
  // Dropout masks, read off the model's own Dropout by applying it to ones.
  std::vector<std::vector<float>> masks;
  if (model.config().dropout > 0.0f) {
    nn::Dropout dropout;
    dropout.seed(model.config().dropout, static_cast<uint64_t>(dropout_seed));
    const int64_t n = 10 * model.config().n_embd;
    for (int site = 1; site <= 3; ++site) {
      for (int64_t l = 0; l < model.config().n_layer; ++l) {
        std::vector<float> m(static_cast<size_t>(n), 1.0f);
        dropout.apply(m.data(), n, static_cast<nn::DropoutSite>(site), l);
        masks.push_back(m);
      }
    }
    const int64_t layers = model.config().n_layer;
    reference.masks = [&masks, layers](int site, int64_t layer) {
      return &masks[static_cast<size_t>((site - 1) * layers + layer)];
    };
  }
  const double exact = reference.loss(b.ids, b.targets, 2);
  EXPECT_NEAR(loss, exact, 1e-5 * std::abs(exact));
  const std::vector<float> grads = model.gradients().to_vector();
  for (const GptParameter& p : model.parameter_table()) {
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    double worst = 0.0, largest = 0.0;
    int64_t worst_at = 0;
    for (int64_t i = 0; i < numel; ++i) {
      double& w = reference.params()[static_cast<size_t>(p.offset + i)];
      const double saved = w, h = 1e-5;
      w = saved + h;
      const double up = reference.loss(b.ids, b.targets, 2);
      w = saved - h;
      const double down = reference.loss(b.ids, b.targets, 2);
      w = saved;
      const double numeric = (up - down) / (2 * h);
      const double error = std::abs(numeric - grads[static_cast<size_t>(p.offset + i)]);
      largest = std::max(largest, std::abs(numeric));
      if (error > worst) {
        worst = error;
        worst_at = i;
      }
    }
    EXPECT_LE(worst, 1e-4 * std::max(largest, 1e-2))
        << p.name << ": worst element " << worst_at << " off by " << worst << " (largest gradient "
        << largest << ")";
  }
}

// Readers build their model with Gpt::zeros (no draw), and the gradient buffer appears at
// its first use, zero-filled, so a model that only generates never holds it.
TEST(Gpt, ZerosHasTheTableOfTheInitialisedModelAndGradientsComeOnFirstUse) {
  GptConfig config;
  config.vocab_size = 11;
  config.block_size = 8;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 8;
  const Gpt drawn(config, 3);
  Gpt zeros = Gpt::zeros(config);
  ASSERT_EQ(zeros.parameter_table().size(), drawn.parameter_table().size());
  for (size_t i = 0; i < drawn.parameter_table().size(); ++i) {
    EXPECT_EQ(zeros.parameter_table()[i].name, drawn.parameter_table()[i].name);
    EXPECT_EQ(zeros.parameter_table()[i].offset, drawn.parameter_table()[i].offset);
  }
  EXPECT_TRUE(testing::BitwiseEqual(zeros.parameters(), Tensor({drawn.num_parameters()})));
  const Tensor& gradients = zeros.gradients();
  ASSERT_EQ(gradients.numel(), drawn.num_parameters());
  EXPECT_TRUE(testing::BitwiseEqual(gradients, Tensor({drawn.num_parameters()})));
  EXPECT_EQ(zeros.gradient("wte").data(), gradients.data());  // one buffer, kept
  zeros.parameters().copy_from(drawn.parameters());
  const std::vector<int64_t> ids = {1, 2, 3, 4}, targets = {2, 3, 4, 5};
  EXPECT_EQ(zeros.forward(ids, targets, 1), Gpt(config, 3).forward(ids, targets, 1));
}

TEST(Gpt, GradientsMatchFiniteDifferencesWithLearnedPositions) {
  Gpt model(tiny(), 1);
  perturb(model, 2);
  check_gradients(model);
}

TEST(Gpt, GradientsMatchFiniteDifferencesWithSinusoidalPositions) {
  Gpt model(tiny(PositionKind::kSinusoidal), 3);
  perturb(model, 4);
  check_gradients(model);
}

TEST(Gpt, GradientsMatchFiniteDifferencesWithRotaryPositionsAndGqa) {
  GptConfig c = tiny(PositionKind::kRotary);
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  Gpt model(c, 5);
  perturb(model, 6);
  check_gradients(model);
}

TEST(Gpt, GradientsMatchFiniteDifferencesWithoutBiases) {
  GptConfig c = tiny();
  c.bias = false;
  Gpt model(c, 7);
  perturb(model, 8);
  EXPECT_TRUE(ThrowsWith([&] { model.parameter("h.0.attn.bqkv"); }, "no parameter named"));
  check_gradients(model);
}

TEST(Gpt, GradientsMatchFiniteDifferencesWithDropout) {
  GptConfig c = tiny();
  c.dropout = 0.25f;
  Gpt model(c, 9);
  perturb(model, 10);
  check_gradients(model, 77);
}

// The backward pass reports the gradients it has finished as a suffix of the buffer that
// grows to the whole (data-parallel sums start on it): each reported suffix already holds its
// final bits, the offsets fall, and the last is 0.
TEST(Gpt, BackwardReportsFinishedSuffixesThatAreFinal) {
  Gpt model(tiny(), 3);
  perturb(model, 4);
  const Batch b = random_batch(3, 6, 7, 5);
  model.zero_grad();
  model.forward(b.ids, b.targets, 3, 9);
  std::vector<std::pair<int64_t, std::vector<float>>> reported;
  const float* g = model.gradients().data();
  const int64_t n = model.num_parameters();
  model.backward(1.0f, [&](int64_t offset) {
    reported.emplace_back(offset, std::vector<float>(g + offset, g + n));
  });
  ASSERT_EQ(reported.size(), 2u + 2u);  // ln_f, each of the 2 blocks, the embeddings
  EXPECT_EQ(reported.front().first, model.parameter_table().end()[-2].offset);  // ln_f.weight
  EXPECT_EQ(reported.back().first, 0);
  for (size_t i = 0; i < reported.size(); ++i) {
    if (i > 0) {  // braces: EXPECT_LT expands to an if/else
      EXPECT_LT(reported[i].first, reported[i - 1].first);
    }
    const std::vector<float> now(g + reported[i].first, g + n);
    EXPECT_EQ(reported[i].second, now)
        << "the suffix from " << reported[i].first << " changed after it was reported final";
  }
}

// A data-parallel step in one process: two halves of a batch, each with its first window's
// index (dropout then draws the whole batch's masks) and half the loss scale, give the loss
// and gradients of the whole batch up to the order of the sums.
TEST(Gpt, TwoHalvesOfABatchGiveTheWholeBatchsStep) {
  GptConfig c = tiny();
  c.dropout = 0.3f;
  Gpt model(c, 3);
  perturb(model, 4);
  const int64_t t = 6;
  const Batch b = random_batch(4, t, 7, 5);
  model.zero_grad();
  const float whole = model.forward(b.ids, b.targets, 4, 17);
  model.backward();
  const std::vector<float> whole_grads = model.gradients().to_vector();

  model.zero_grad();
  float halves = 0.0f;
  for (int64_t first : {0, 2}) {
    const std::span<const int64_t> ids(b.ids.data() + first * t, 2 * t);
    const std::span<const int64_t> targets(b.targets.data() + first * t, 2 * t);
    halves += 0.5f * model.forward(ids, targets, 2, 17, first);
    model.backward(0.5f);
  }
  EXPECT_NEAR(halves, whole, 1e-6f * std::fabs(whole));
  EXPECT_TRUE(testing::AllClose(model.gradients(),
                                Tensor::from_values({model.num_parameters()}, whole_grads), 1e-6));
  // Without the window index the second half draws the first half's masks: another step.
  model.zero_grad();
  const float wrong =
      0.5f * model.forward({b.ids.data(), 2 * t}, {b.targets.data(), 2 * t}, 2, 17) +
      0.5f * model.forward({b.ids.data() + 2 * t, 2 * t}, {b.targets.data() + 2 * t, 2 * t}, 2, 17);
  EXPECT_GT(std::fabs(wrong - whole), 1e-4f);
}

// Every tensor's role, and that initialisation follows the role: γ ones, biases and β zeros,
// the matrices N(0, 0.02²) but the residual projections N(0, (0.02/√(2·n_layer))²).
TEST(Gpt, InitialisationFollowsEachParameterRole) {
  GptConfig c = tiny();
  c.n_embd = 32;
  c.n_head = 4;
  Gpt model(c, 3);
  auto expected_role = [](const std::string& name) {
    if (name == "wte" || name == "wpe") return ParameterRole::kEmbedding;
    if (name.ends_with("attn.wo") || name.ends_with("mlp.wproj")) {
      return ParameterRole::kResidualProjection;
    }
    if (name.ends_with("attn.wqkv") || name.ends_with("mlp.wfc")) return ParameterRole::kWeight;
    if (name.ends_with(".weight")) return ParameterRole::kNormGain;
    if (name.ends_with(".bias")) return ParameterRole::kNormBias;
    return ParameterRole::kBias;
  };
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (const GptParameter& p : model.parameter_table()) {
    EXPECT_EQ(p.role, expected_role(p.name)) << p.name;
    const std::vector<float> values = model.parameter(p.name).to_vector();
    double sum_squares = 0.0;
    for (float v : values) sum_squares += static_cast<double>(v) * v;
    const double rms = std::sqrt(sum_squares / static_cast<double>(values.size()));
    switch (p.role) {
      case ParameterRole::kNormGain:
        EXPECT_EQ(values, std::vector<float>(values.size(), 1.0f)) << p.name;
        break;
      case ParameterRole::kNormBias:
      case ParameterRole::kBias:
        EXPECT_EQ(values, std::vector<float>(values.size(), 0.0f)) << p.name;
        break;
      case ParameterRole::kEmbedding:
      case ParameterRole::kWeight:
        EXPECT_NEAR(rms, 0.02, 0.02 * 0.15) << p.name;  // ≥ 1024 draws: the rms within 15 %
        break;
      case ParameterRole::kResidualProjection:
        EXPECT_NEAR(rms, residual_std, residual_std * 0.15) << p.name;
        break;
    }
  }
}

TEST(Gpt, ParameterTableTilesTheBufferAndDecaysOnlyBlockMatrices) {
  Gpt model(tiny(), 1);
  int64_t next = 0;
  for (const GptParameter& p : model.parameter_table()) {
    EXPECT_EQ(p.offset, next) << p.name;
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    next += numel;
    EXPECT_EQ(decays(p.role), p.shape.size() == 2 && p.name != "wte" && p.name != "wpe") << p.name;
  }
  EXPECT_EQ(next, model.num_parameters());
  // 7·8 + 6·8 + 2·(12·8² + 13·8) + 2·8: the GPT-2 count for this size.
  EXPECT_EQ(model.num_parameters(), 56 + 48 + 2 * (12 * 64 + 13 * 8) + 16);
  EXPECT_EQ(model.parameter("ln_f.weight").to_vector(), std::vector<float>(8, 1.0f));
}

// parameter_count() is what readers check files against before building a model: it must agree
// with the table the constructor builds for every kind of layout.
TEST(Gpt, ParameterCountMatchesTheModelItDescribes) {
  for (const bool bias : {true, false}) {
    for (const PositionKind positions : kEveryPositionKind) {
      for (const int64_t kv_heads : {0, 1, 2}) {
        GptConfig c = tiny();
        c.n_head = 2;
        c.n_kv_head = kv_heads;
        c.bias = bias;
        c.positions = positions;
        EXPECT_EQ(parameter_count(c), Gpt(c).num_parameters())
            << "bias " << bias << " positions " << to_string(positions) << " kv " << kv_heads;
      }
    }
  }
  GptConfig bad = tiny();
  bad.n_embd = 7;  // not divisible by n_head: the same error as the constructor's
  EXPECT_THROW(parameter_count(bad), Error);
}

// A model wide enough that its products and attention split over the threads.
GptConfig split_config() {
  GptConfig c = tiny();
  c.n_embd = 64;
  c.n_head = 4;
  c.block_size = 64;
  return c;
}

// One training forward and backward on 1 and on 2 threads: the same loss and gradients, bit
// for bit.
void expect_independent_of_the_thread_count(Dtype precision) {
  const GptConfig c = split_config();
  const Batch b = random_batch(4, 64, c.vocab_size, 3);
  float losses[2];
  Tensor grads[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Gpt model(c, 1);
    model.set_training_precision(precision);
    losses[threads - 1] = model.forward(b.ids, b.targets, 4);
    model.backward();
    grads[threads - 1] = model.gradients().clone();
  }
  set_num_threads(0);
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_TRUE(testing::BitwiseEqual(grads[0], grads[1]));
}

// The weights of every layer and head against the double forward's softmax, for learned
// positions and for rotary + GQA; rows sum to 1 and the causal triangle is exactly 0. Wqkv is
// scaled up so the weights are far from uniform (a uniform answer would pass by accident).
void check_attention_weights(const GptConfig& config) {
  Gpt model(config, 4);
  perturb(model, 6);
  for (int64_t l = 0; l < config.n_layer; ++l) {
    Tensor w = model.parameter("h." + std::to_string(l) + ".attn.wqkv");
    float* p = w.data();
    for (int64_t i = 0; i < w.numel(); ++i) p[i] *= 40.0f;
  }
  const std::vector<int64_t> ids = {3, 1, 4, 1, 5, 2};
  const int64_t t = 6, h = config.n_head;
  const Tensor weights = model.attention_weights(ids);
  ASSERT_EQ(weights.shape(), (Shape{config.n_layer, h, t, t}));
  std::vector<double> exact;
  testing::DoubleGpt reference(model);
  reference.weights_out = &exact;
  reference.loss(ids, ids, 1);
  const std::vector<float> got = weights.to_vector();
  double worst = 0.0, largest_row_max = 0.0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - exact[i]));
  EXPECT_LE(worst, 1e-5);
  for (int64_t row = 0; row < config.n_layer * h * t; ++row) {
    const int64_t i = row % t;
    double sum = 0.0, row_max = 0.0;
    for (int64_t j = 0; j < t; ++j) {
      const float w = got[static_cast<size_t>(row * t + j)];
      if (j > i) {
        EXPECT_EQ(w, 0.0f) << "row " << row << " key " << j;
      }
      sum += w;
      row_max = std::max(row_max, static_cast<double>(w));
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << row;
    if (i == t - 1) largest_row_max = std::max(largest_row_max, row_max);
  }
  EXPECT_GT(largest_row_max, 0.5);  // a last row far from uniform (1/6)
}

TEST(Gpt, AttentionWeightsMatchTheDoubleForwardInEveryLayerAndHead) {
  check_attention_weights(tiny());
  GptConfig rotary_gqa = tiny(PositionKind::kRotary);
  rotary_gqa.n_head = 4;
  rotary_gqa.n_kv_head = 2;
  check_attention_weights(rotary_gqa);
}

TEST(Gpt, AttentionWeightsRefuseBadIds) {
  const Gpt model(tiny(), 1);
  EXPECT_TRUE(ThrowsWith([&] { (void)model.attention_weights({}); }, "attention_weights"));
  EXPECT_TRUE(ThrowsWith([&] { (void)model.attention_weights(std::vector<int64_t>(7, 1)); },
                         "exceed block_size"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        (void)model.attention_weights(std::vector<int64_t>{1, 7});
      },
      "outside [0, 7)"));
}

TEST(Gpt, ResultsDoNotDependOnTheThreadCount) {
  expect_independent_of_the_thread_count(Dtype::kFloat32);
}

// Mixed precision: the training passes round the products' operands to bf16, so loss and
// gradients move by bf16's rounding (2^-9 relative) and no more; inference stays float;
// thread-count independence holds as in float.
TEST(Gpt, BfloatTrainingPassesStayCloseToFloatAndInferenceStaysFloat) {
  const GptConfig c = split_config();
  const Batch b = random_batch(4, 64, c.vocab_size, 3);
  Gpt f32(c, 1), bf16(c, 1);
  perturb(f32, 5);
  perturb(bf16, 5);
  bf16.set_training_precision(Dtype::kBFloat16);
  const float loss32 = f32.forward(b.ids, b.targets, 4), loss16 = bf16.forward(b.ids, b.targets, 4);
  f32.backward();
  bf16.backward();
  EXPECT_NEAR(loss16, loss32, 1e-2 * loss32);
  EXPECT_NE(loss16, loss32);  // the rounding happened
  const std::vector<float> g32 = f32.gradients().to_vector(), g16 = bf16.gradients().to_vector();
  double largest = 0.0, worst = 0.0;
  for (size_t i = 0; i < g32.size(); ++i) {
    largest = std::max(largest, static_cast<double>(std::fabs(g32[i])));
    worst = std::max(worst, static_cast<double>(std::fabs(g32[i] - g16[i])));
  }
  EXPECT_LT(worst, 3e-2 * largest) << "worst gradient difference " << worst << " of " << largest;
  EXPECT_EQ(bf16.loss(b.ids, b.targets, 4), f32.loss(b.ids, b.targets, 4));
  expect_independent_of_the_thread_count(Dtype::kBFloat16);
}

// A bf16 training step rounds the weights once and each product's input once, for the forward
// and the backward's products alike (Activations::keep_rounded_operands): the bits of letting
// every product round its own operands, with biases or not, rotary positions and grouped heads.
TEST(Gpt, BfloatStepsRoundingEachOperandOnceGiveTheBitsOfRoundingPerProduct) {
  GptConfig rotary = split_config();
  rotary.positions = PositionKind::kRotary;
  rotary.n_kv_head = 2;
  rotary.bias = false;
  for (const GptConfig& c : {split_config(), rotary}) {
    const Batch b = random_batch(4, 64, c.vocab_size, 3);
    float losses[2];
    Tensor grads[2];
    for (int kept = 0; kept < 2; ++kept) {
      nn::keep_rounded_operands_for_test(kept == 1);
      Gpt model(c, 1);
      perturb(model, 5);
      model.set_training_precision(Dtype::kBFloat16);
      losses[kept] = model.forward(b.ids, b.targets, 4);
      model.backward();
      grads[kept] = model.gradients().clone();
    }
    nn::keep_rounded_operands_for_test(true);
    EXPECT_EQ(std::bit_cast<uint32_t>(losses[0]), std::bit_cast<uint32_t>(losses[1]));
    EXPECT_TRUE(testing::BitwiseEqual(grads[0], grads[1]));
  }
}

// A perturbed model with 4 query heads over 2 K/V heads, for the decoding tests.
Gpt grouped_heads_model(PositionKind kind) {
  GptConfig c = tiny(kind);
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  Gpt model(c, 2);
  perturb(model, 3);
  return model;
}

TEST(Gpt, DecodingThroughTheCacheMatchesTheFullForward) {
  for (PositionKind kind : kEveryPositionKind) {
    const Gpt model = grouped_heads_model(kind);
    const GptConfig& c = model.config();
    const Batch b = random_batch(2, 6, c.vocab_size, 4);
    const Tensor full = model.logits(b.ids, 2);
    GptCache cache = model.make_cache(2);
    // A prefill of 2 tokens, then one at a time.
    std::vector<Tensor> pieces;
    auto feed = [&](int64_t from, int64_t count) {
      std::vector<int64_t> ids;
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t i = from; i < from + count; ++i)
          ids.push_back(b.ids[static_cast<size_t>(r * 6 + i)]);
      }
      const Tensor logits = model.decode(ids, 2, cache);
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t i = 0; i < count; ++i) {
          for (int64_t v = 0; v < c.vocab_size; ++v) {
            EXPECT_NEAR(logits.at({r, i, v}), full.at({r, from + i, v}), 1e-5)
                << to_string(kind) << " row " << r << " position " << from + i;
          }
        }
      }
    };
    feed(0, 2);
    for (int64_t i = 2; i < 6; ++i) feed(i, 1);
    EXPECT_EQ(cache.position(), 6);
    EXPECT_TRUE(ThrowsWith(
        [&] {
          model.decode(std::vector<int64_t>{1, 1}, 2, cache);
        },
        "exceed block_size"));
  }
}

TEST(Gpt, DecodingOnlyTheLastLogitsGivesEachSequencesLastRow) {
  for (PositionKind kind : kEveryPositionKind) {
    const Gpt model = grouped_heads_model(kind);
    const GptConfig& c = model.config();
    const Batch b = random_batch(3, 5, c.vocab_size, 4);
    GptCache every_cache = model.make_cache(3), last_cache = model.make_cache(3);
    const Tensor every = model.decode(b.ids, 3, every_cache);
    // The last layer attends and runs its MLP on the last rows only.
    const Tensor last = model.decode(b.ids, 3, last_cache, LogitRows::kLast);
    ASSERT_EQ(last.shape(), (std::vector<int64_t>{3, 1, c.vocab_size}));
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t v = 0; v < c.vocab_size; ++v) {
        EXPECT_NEAR(last.at({r, 0, v}), every.at({r, 4, v}), 1e-5)
            << to_string(kind) << " sequence " << r;
      }
    }
    // The caches hold the same keys and values: the next token's logits are the same.
    const std::vector<int64_t> next{1, 2, 3};
    const Tensor after_every = model.decode(next, 3, every_cache);
    const Tensor after_last = model.decode(next, 3, last_cache, LogitRows::kLast);
    EXPECT_EQ(after_last.to_vector(), after_every.to_vector()) << to_string(kind);
  }
}

TEST(Gpt, GenerationWithTheCacheGivesTheTokensOfTheFullWindow) {
  GptConfig c = tiny(PositionKind::kLearned);
  c.block_size = 8;
  c.n_embd = 16;
  Gpt model(c, 5);
  perturb(model, 6);
  for (float temperature : {0.0f, 1.0f}) {
    GenerateOptions options;
    options.max_new_tokens = 30;  // past block_size: the context restarts several times
    options.sampling.temperature = temperature;
    options.sampling.top_k = temperature > 0 ? 5 : 0;
    options.seed = 42;
    std::vector<int64_t> streamed;
    const std::vector<int64_t> fast =
        generate(model, {1, 2, 3}, options, [&](int64_t t) { streamed.push_back(t); });
    options.use_cache = false;
    const std::vector<int64_t> slow = generate(model, {1, 2, 3}, options);
    EXPECT_EQ(fast, slow) << "temperature " << temperature;
    EXPECT_EQ(fast, streamed);
    EXPECT_EQ(fast.size(), 30u);
  }
}

// Probabilities 0.5, 0.3, 0.2 (logits their logs): top_p = 0.75 keeps the first two (0.8 ≥
// 0.75), drawn in proportion 5 : 3; top_p = 0.5 keeps the first alone; 1 keeps all.
TEST(Gpt, TopPKeepsTheSmallestNucleus) {
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  std::mt19937_64 rng(3);
  std::vector<int> counts(3);
  for (int i = 0; i < 8000; ++i) {
    ++counts[static_cast<size_t>(sample_token(logits, {1.0f, 0, 0.75f}, rng))];
  }
  EXPECT_EQ(counts[0], 0);
  EXPECT_NEAR(counts[1] / 8000.0, 5.0 / 8.0, 0.02);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(logits, {1.0f, 0, 0.5f}, rng), 1);
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < 8000; ++i) ++counts[static_cast<size_t>(sample_token(logits, {}, rng))];
  EXPECT_NEAR(counts[0] / 8000.0, 0.2, 0.02);
  EXPECT_TRUE(ThrowsWith(
      [&] {
        sample_token(logits, {1.0f, 0, 0.0f}, rng);
      },
      "top_p must be in (0, 1]"));
  EXPECT_TRUE(ThrowsWith([&] { sample_token(logits, {1.0f, 0, 1.5f}, rng); }, "top_p"));
}

TEST(Gpt, SamplingIsSeededAndRespectsTopK) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f, -1.0f};
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(logits, {0.0f, 0}, rng), 1);  // greedy: the lower id of a tie
  std::vector<int> counts(5);
  for (int i = 0; i < 4000; ++i)
    ++counts[static_cast<size_t>(sample_token(logits, {1.0f, 2}, rng))];
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_NEAR(counts[1] / 4000.0, 0.5, 0.05);
  std::mt19937_64 a(9), b(9);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(sample_token(logits, {0.8f, 0}, a), sample_token(logits, {0.8f, 0}, b));
  const std::vector<float> bad = {0.0f, NAN};
  EXPECT_TRUE(ThrowsWith([&] { sample_token(bad, {}, rng); }, "logit 1 is"));
  EXPECT_TRUE(ThrowsWith([&] { sample_token(logits, {-1.0f, 0}, rng); }, "temperature"));
}

TEST(Gpt, Errors) {
  GptConfig c = tiny();
  c.n_embd = 9;
  EXPECT_TRUE(ThrowsWith([&] { Gpt m(c); }, "must divide by n_head"));
  c = tiny();
  c.n_kv_head = 3;
  EXPECT_TRUE(ThrowsWith([&] { Gpt m(c); }, "n_kv_head"));
  c = tiny();
  c.dropout = 1.0f;
  EXPECT_TRUE(ThrowsWith([&] { Gpt m(c); }, "dropout"));
  Gpt model(tiny(), 1);
  const std::vector<int64_t> ok = {1, 2, 3}, bad = {1, 9, 3}, long_ids(7, 1);
  EXPECT_TRUE(ThrowsWith([&] { model.forward(bad, ok, 1); }, "token id 9 at index 1"));
  EXPECT_TRUE(ThrowsWith([&] { model.forward(ok, bad, 1); }, "target 9"));
  EXPECT_TRUE(ThrowsWith([&] { model.forward(long_ids, long_ids, 1); }, "exceed block_size 6"));
  EXPECT_TRUE(ThrowsWith([&] { model.forward(ok, ok, 2); }, "do not split into batch = 2 rows"));
  EXPECT_TRUE(ThrowsWith([&] { model.logits({}, 1); }, "Gpt::logits: no token ids"));
  EXPECT_TRUE(ThrowsWith([&] { model.backward(); }, "call forward"));
  model.forward(ok, ok, 1);
  EXPECT_THROW(model.forward(ok, bad, 1), Error);  // a forward that failed cancels the pending one
  EXPECT_TRUE(ThrowsWith([&] { model.backward(); }, "call forward"));
  EXPECT_TRUE(ThrowsWith([&] { generate(model, {}, {}); }, "at least one token"));
  EXPECT_EQ(gpt_config_from_json(to_json(tiny(PositionKind::kRotary))).positions,
            PositionKind::kRotary);
  EXPECT_TRUE(ThrowsWith([&] { gpt_config_from_json(R"({"vocab_size": 3})"); }, "GptConfig"));
}

// Inference owns its buffers: an evaluation between forward() and backward() (of another shape
// too) leaves the pending backward as it was, so its gradients are the ones without it.
TEST(Gpt, EvaluationBetweenForwardAndBackwardChangesNothing) {
  const GptConfig config = tiny();
  Gpt plain(config, 4), interrupted(config, 4);
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 0}, targets = {2, 3, 4, 5, 0, 1};
  const std::vector<int64_t> other = {3, 3, 1};
  const float plain_loss = plain.forward(ids, targets, 2);
  plain.backward();
  const float interrupted_loss = interrupted.forward(ids, targets, 2);
  interrupted.loss(ids, targets, 2);
  interrupted.loss(other, other, 1);
  interrupted.logits(other, 3);
  interrupted.attention_weights(other);
  interrupted.backward();
  EXPECT_EQ(plain_loss, interrupted_loss);
  EXPECT_TRUE(testing::BitwiseEqual(plain.gradients(), interrupted.gradients()));
  const Gpt& as_const = Gpt(config, 4);
  EXPECT_TRUE(ThrowsWith([&] { as_const.gradients(); }, "has none yet"));
}

// One model, many callers: threads calling the const methods of one Gpt at once (logits of
// several lengths and batches, attention weights, decoding into their own caches, generation)
// each get, bit for bit, what one thread alone gets. Under make test-tsan this also proves
// that no call writes what another reads.
TEST(Gpt, SharedModelGivesEveryThreadItsOneThreadAnswer) {
  GptConfig config = tiny(PositionKind::kRotary);
  config.block_size = 16;
  config.vocab_size = 11;
  const Gpt model(config, 9);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t t : {1, 2, 5, 16}) prompts.push_back(random_batch(1, t, config.vocab_size, t).ids);
  const std::vector<int64_t> pair = random_batch(2, 7, config.vocab_size, 3).ids;
  GenerateOptions sampling;
  sampling.max_new_tokens = 6;
  sampling.seed = 5;
  // What one thread gets.
  std::vector<Tensor> logits, weights;
  for (const auto& p : prompts) logits.push_back(model.logits(p, 1));
  for (const auto& p : prompts) weights.push_back(model.attention_weights(p));
  const Tensor pair_logits = model.logits(pair, 2);
  const std::vector<int64_t> generated = generate(model, prompts[1], sampling);
  GptCache alone = model.make_cache(1);
  const Tensor decoded = model.decode(prompts[2], 1, alone);

  constexpr int kThreads = 4, kRounds = 12;
  std::atomic<int> mismatches{0}, calls{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t i = static_cast<size_t>(thread + round) % prompts.size();
        bool same = testing::BitwiseEqual(model.logits(prompts[i], 1), logits[i]) &&
                    testing::BitwiseEqual(model.attention_weights(prompts[i]), weights[i]) &&
                    testing::BitwiseEqual(model.logits(pair, 2), pair_logits);
        GptCache cache = model.make_cache(1);
        same = same && testing::BitwiseEqual(model.decode(prompts[2], 1, cache), decoded);
        same = same && generate(model, prompts[1], sampling) == generated;
        if (!same) mismatches.fetch_add(1);
        calls.fetch_add(5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls.load(), kThreads * kRounds * 5);
  EXPECT_EQ(mismatches.load(), 0);
}

// The FLOP model reads the parameter layout: it must give the products counted by hand,
// C·(C + 2·kv_width) for Wqkv (narrower with GQA) and C² + 8C² for Wo and the MLP a token,
// and the tied head's C·vocab.
TEST(Gpt, FlopsReadOffTheLayoutAreTheHandCount) {
  GptConfig c;
  c.vocab_size = 50;
  c.block_size = 16;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  const double e = 32.0, kv_width = 2.0 * 8.0, qkv = e * (e + 2.0 * kv_width), rest = 9.0 * e * e;
  const double head = e * 50.0;
  EXPECT_DOUBLE_EQ(training_matmul_flops(c, 2.0), 6.0 * 2.0 * 16.0 * (3.0 * (qkv + rest) + head));
  const double t = 10.0;
  const double prompt =
      2.0 * (3.0 * t * qkv + 2.0 * t * rest + rest + head + 2.0 * t * (t + 1.0) * e + 2.0 * e * t);
  EXPECT_DOUBLE_EQ(prompt_flops(c, t), prompt);
  EXPECT_DOUBLE_EQ(prompt_attention_flops(c, t), 2.0 * (2.0 * t * (t + 1.0) * e + 2.0 * e * t));
  EXPECT_DOUBLE_EQ(prompt_matmul_flops(c, t) + prompt_attention_flops(c, t), prompt);
  // GPT-2's names come with the layout: every parameter has one, and they are distinct.
  const Gpt model(c);
  std::set<std::string> names;
  for (const GptParameter& p : model.parameter_table()) names.insert(p.hf_name);
  EXPECT_EQ(names.size(), model.parameter_table().size());
  EXPECT_EQ(model.parameter_table()[2].hf_name, "h.0.ln_1.weight");
  EXPECT_TRUE(names.count("h.2.attn.c_attn.weight") && names.count("h.1.mlp.c_proj.bias"));
}

}  // namespace
}  // namespace attn
