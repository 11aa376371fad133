// Gpt::set_weights_dtype(kBFloat16): the model with its matrices in bfloat16 against a float
// model holding the same bf16 values — bit for bit, one row at a time (decoding) and many (a
// prompt, a window) — its greedy tokens, its memory, and what it refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>

#include "attn/bfloat16.hpp"
#include "attn/gpt.hpp"
#include "attn/threads.hpp"
#include "bf16_engines.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;

GptConfig small(PositionKind positions, int64_t kv_heads) {
  GptConfig c;
  c.vocab_size = 61;
  c.block_size = 24;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.n_embd = 32;
  c.positions = positions;
  return c;
}

// The parameters bf16 weights hold in bf16, as the header names them: wte and the blocks'
// four matrices.
bool kept_in_bf16(const GptParameter& p) {
  return p.name == "wte" || p.role == ParameterRole::kWeight ||
         p.role == ParameterRole::kResidualProjection;
}

// A float model whose matrices hold what set_weights_dtype(kBFloat16) keeps of `model`'s.
Gpt rounded_copy(const Gpt& model) {
  Gpt copy = Gpt::zeros(model.config());
  copy.parameters().copy_from(model.parameters());
  for (const GptParameter& p : copy.parameter_table()) {
    if (!kept_in_bf16(p)) continue;
    Tensor view = copy.parameter(p.name);
    for (int64_t i = 0; i < view.numel(); ++i)
      view.data()[i] = from_bfloat16(to_bfloat16(view.data()[i]));
  }
  return copy;
}

std::vector<int64_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  return ids;
}

struct Variant {
  PositionKind positions;
  int64_t kv_heads;
};

TEST(GptBf16Weights, DecodesBitForBitAsAFloatModelOfTheSameValues) {
  for (const Variant v : {Variant{PositionKind::kLearned, 0}, Variant{PositionKind::kRotary, 2}}) {
    Gpt half(small(v.positions, v.kv_heads), 3);
    const Gpt same = rounded_copy(half);
    half.set_weights_dtype(Dtype::kBFloat16);
    EXPECT_EQ(half.weights_dtype(), Dtype::kBFloat16);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      GptCache a = half.make_cache(1), b = same.make_cache(1);
      for (int64_t id : random_ids(12, 61, 5)) {
        const int64_t one[] = {id};
        ASSERT_TRUE(testing::BitwiseEqual(half.decode(one, 1, a), same.decode(one, 1, b)))
            << "position " << a.position() << ", " << threads << " threads";
      }
      // Greedy generation from one token (every step a one-row product): the same tokens.
      GenerateOptions greedy;
      greedy.max_new_tokens = 30;
      greedy.sampling.temperature = 0.0f;
      EXPECT_EQ(generate(half, {7}, greedy), generate(same, {7}, greedy));
    }
    set_num_threads(0);
  }
}

// More rows (a prompt, a window's logits): the same bits as the float model of the same values
// too; and the model is still the float model it came from, within bf16's rounding.
TEST(GptBf16Weights, TheFullWindowIsTheFloatForwardOfTheSameValues) {
  // With AMX or vdpbf16ps a prompt's products round the activations too
  // (GemmBf16Weights.OnBf16KernelsRoundsTheRowsAsWell).
  const testing::OnlyBf16Engine exact_products(testing::Bf16Engine::kVector);
  const GptConfig config = small(PositionKind::kLearned, 0);
  const Gpt original(config, 4);
  Gpt half(config, 4);
  const Gpt same = rounded_copy(half);
  half.set_weights_dtype(Dtype::kBFloat16);
  const std::vector<int64_t> ids = random_ids(2 * 20, 61, 6), targets = random_ids(2 * 20, 61, 7);
  EXPECT_EQ(half.loss(ids, targets, 2), same.loss(ids, targets, 2));
  EXPECT_TRUE(testing::BitwiseEqual(half.logits(ids, 2), same.logits(ids, 2)));
  GptCache a = half.make_cache(1), b = same.make_cache(1);
  const std::vector<int64_t> prompt(ids.begin(), ids.begin() + 15);
  EXPECT_TRUE(testing::BitwiseEqual(half.decode(prompt, 1, a), same.decode(prompt, 1, b)));
  // bf16 keeps 8 bits: each product is off by about 2^-8 of its terms' size; a few layers of
  // them stay within 2 % of the largest logit here (measured: 0.22 %).
  EXPECT_TRUE(testing::RelativelyClose(half.logits(ids, 2), original.logits(ids, 2), 0.02,
                                       "bf16 weights against float"));
  const Tensor weights = half.attention_weights(std::vector<int64_t>(ids.begin(), ids.begin() + 9));
  EXPECT_TRUE(testing::BitwiseEqual(
      weights, same.attention_weights(std::vector<int64_t>(ids.begin(), ids.begin() + 9))));
}

// With AMX or vdpbf16ps the prompt's products also round the activations: the logits stay as
// near the float model's as the weights' rounding alone left them.
TEST(GptBf16Weights, OnBf16KernelsThePromptStaysNearTheFloatModel) {
  const int engines_run = testing::for_each_fast_bf16_engine([](testing::Bf16Engine engine) {
    const GptConfig config = small(PositionKind::kLearned, 0);
    const Gpt original(config, 4);
    Gpt half(config, 4);
    half.set_weights_dtype(Dtype::kBFloat16);
    const std::vector<int64_t> ids = random_ids(2 * 20, 61, 6);
    EXPECT_TRUE(testing::RelativelyClose(
        half.logits(ids, 2), original.logits(ids, 2), 0.02,
        "bf16 weights and rows against float, " + testing::param_name(engine)));
  });
  if (engines_run == 0)
    GTEST_SKIP() << "this CPU has no bf16 kernel (AMX-BF16 or a fast vdpbf16ps)";
}

// /proc/self/statm's resident pages, in bytes.
double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

TEST(GptBf16Weights, HoldsHalfTheBytesAndReleasesTheFloats) {
  GptConfig c;
  c.vocab_size = 8192;
  c.block_size = 64;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 256;
  Gpt model(c, 1);
  const int64_t floats = model.weight_bytes();
  EXPECT_EQ(floats, 4 * model.num_parameters());
  int64_t matrix_params = 0;
  for (const GptParameter& p : model.parameter_table()) {
    if (kept_in_bf16(p)) matrix_params += p.shape[0] * p.shape[1];
  }
  const double before = resident_bytes();
  model.set_weights_dtype(Dtype::kBFloat16);
  const double after = resident_bytes();
  EXPECT_EQ(model.weight_bytes(), floats - 2 * matrix_params);
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the resident size: ThreadSanitizer's shadow memory grows with every byte "
                  "touched (130 -> 162 MB here), so it does not show pages released";
#endif
  // The matrices' 4 bytes a parameter released, 2 allocated: at least 3/4 of the difference.
  EXPECT_LT(after, before - 0.75 * 2.0 * static_cast<double>(matrix_params))
      << "resident " << before / 1e6 << " MB -> " << after / 1e6 << " MB, matrices "
      << 4.0 * static_cast<double>(matrix_params) / 1e6 << " MB as float";
}

TEST(GptBf16Weights, RefusesWhatNeedsTheFloats) {
  Gpt model(small(PositionKind::kLearned, 0), 2);
  model.set_weights_dtype(Dtype::kFloat32);  // a float model stays as it is
  EXPECT_EQ(model.weights_dtype(), Dtype::kFloat32);
  model.set_weights_dtype(Dtype::kBFloat16);
  model.set_weights_dtype(Dtype::kBFloat16);  // again: nothing to do
  const std::vector<int64_t> ids = {1, 2, 3}, targets = {2, 3, 4};
  EXPECT_TRUE(ThrowsWith([&] { model.forward(ids, targets, 1); },
                         "Gpt: forward needs the float weights, but this model keeps its "
                         "matrices in bf16"));
  EXPECT_TRUE(ThrowsWith([&] { model.parameters(); }, "parameters needs the float weights"));
  EXPECT_TRUE(ThrowsWith([&] { model.parameter("h.1.mlp.wfc"); }, "h.1.mlp.wfc needs the float"));
  EXPECT_EQ(model.parameter("ln_f.weight").numel(), 32);  // kept in float
  EXPECT_TRUE(ThrowsWith([&] { model.set_weights_dtype(Dtype::kFloat32); },
                         "bf16 weights cannot become float again"));
  EXPECT_TRUE(ThrowsWith([] { weights_dtype_from_string("f16"); },
                         "weights must be \"f32\" or \"bf16\", got \"f16\""));
  EXPECT_EQ(to_string(Dtype::kBFloat16), "bf16");
}

}  // namespace
}  // namespace attn
