// Training: the schedule, AdamW against its formula, clipping, that a small model learns,
// determinism, checkpoint round trips, resume = uninterrupted run, and broken checkpoints.
#include "attn/train.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "attn/io.hpp"
#include "src/kernels/adamw.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;
using Training = testing::TempDirTest;

GptConfig small_config(int64_t vocab) {
  GptConfig c;
  c.vocab_size = vocab;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

TrainOptions small_options() {
  TrainOptions o;
  o.batch_size = 4;
  o.max_iters = 8;
  o.warmup_iters = 2;
  o.eval_iters = 2;
  o.lr = 3e-3f;
  o.min_lr = 3e-4f;
  return o;
}

const std::string kText =
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog. the dog saw the cat.\n";

std::vector<int64_t> corpus_tokens(const CharTokenizer& tok, int repeats) {
  std::string text;
  for (int i = 0; i < repeats; ++i) text += kText;
  return tok.encode(text);
}

TEST(LearningRate, WarmsUpThenFollowsTheCosineToTheFloor) {
  EXPECT_FLOAT_EQ(learning_rate(0, 1e-3f, 1e-4f, 100, 2000), 1e-3f / 101);
  EXPECT_FLOAT_EQ(learning_rate(99, 1e-3f, 1e-4f, 100, 2000), 1e-3f * 100 / 101);
  EXPECT_FLOAT_EQ(learning_rate(100, 1e-3f, 1e-4f, 100, 2000), 1e-3f);
  EXPECT_NEAR(learning_rate(1050, 1e-3f, 1e-4f, 100, 2000), 5.5e-4f, 1e-9);
  EXPECT_FLOAT_EQ(learning_rate(2000, 1e-3f, 1e-4f, 100, 2000), 1e-4f);
  EXPECT_FLOAT_EQ(learning_rate(5000, 1e-3f, 1e-4f, 100, 2000), 1e-4f);
}

TEST(AdamW, TheVectorKernelGivesTheScalarFormulasBits) {
  // 37 elements: whole vectors and a scalar tail, at any vector width; decayed or not, with
  // the gradients scaled (clipping) or as they are.
  const int n = 37;
  for (const float keep : {1.0f, 1.0f - 1e-4f}) {
    for (const float grad_scale : {1.0f, 0.37f}) {
      std::vector<float> p(n), m(n), v(n), g(n);
      for (int i = 0; i < n; ++i) {
        p[i] = std::sin(0.7f * i);
        m[i] = 0.01f * std::cos(1.3f * i);
        v[i] = 1e-4f * (1.0f + std::sin(0.3f * i));
        g[i] = 0.05f * std::sin(2.1f * i + 1.0f);
      }
      const kernels::AdamWStep s{0.9f, 0.99f, 1e-3f / 0.1f, std::sqrt(0.0199f), 1e-8f, grad_scale};
      std::vector<float> want_p = p, want_m = m, want_v = v;
      for (int i = 0; i < n; ++i) {
        const float gi = grad_scale * g[i];
        want_p[i] *= keep;
        want_m[i] = s.beta1 * want_m[i] + (1.0f - s.beta1) * gi;
        want_v[i] = s.beta2 * want_v[i] + (1.0f - s.beta2) * gi * gi;
        want_p[i] -= s.step_size * want_m[i] / (std::sqrt(want_v[i]) / s.sqrt_bias2 + s.eps);
      }
      kernels::adamw_update_span(p.data(), m.data(), v.data(), g.data(), n, keep, s);
      EXPECT_EQ(p, want_p) << "keep " << keep << ", scale " << grad_scale;
      EXPECT_EQ(m, want_m);
      EXPECT_EQ(v, want_v);
    }
  }
}

// A step with the gradients scaled by c is the step after clip_grad_norm scaled them by c,
// bit for bit (the trainer clips that way, without rewriting the gradients).
TEST(AdamW, AGradientScaleIsClippingInPlace) {
  GptConfig c = small_config(5);
  Gpt scaled(c, 1), clipped(c, 1);
  for (Gpt* model : {&scaled, &clipped}) {
    float* g = model->gradients().data();
    for (int64_t i = 0; i < model->num_parameters(); ++i)
      g[i] = 0.3f * std::sin(0.01f * static_cast<float>(i));
  }
  AdamW a(scaled, AdamWOptions{}), b(clipped, AdamWOptions{});
  const float norm = grad_norm(scaled);
  ASSERT_GT(norm, 1.0f);
  a.step(scaled, 1e-3f, clip_scale(norm, 1.0f));
  EXPECT_EQ(clip_grad_norm(clipped, 1.0f), norm);
  b.step(clipped, 1e-3f);
  EXPECT_TRUE(testing::BitwiseEqual(scaled.parameters(), clipped.parameters()));
  EXPECT_TRUE(testing::BitwiseEqual(a.m, b.m));
  EXPECT_TRUE(testing::BitwiseEqual(a.v, b.v));
  EXPECT_EQ(clip_scale(0.5f, 1.0f), 1.0f);
  EXPECT_EQ(clip_scale(4.0f, 0.0f), 1.0f);
  EXPECT_TRUE(testing::ThrowsWith([] { clip_scale(INFINITY, 1.0f); }, "gradient norm is inf"));
}

TEST(AdamW, FollowsTheFormulaAndDecaysOnlyMarkedParameters) {
  GptConfig c = small_config(5);
  Gpt model(c, 1);
  float* g = model.gradients().data();
  for (int64_t i = 0; i < model.num_parameters(); ++i) g[i] = 0.01f * static_cast<float>(i % 7 - 3);
  const std::vector<float> before = model.parameters().to_vector();
  AdamWOptions o;
  o.weight_decay = 0.5f;
  AdamW adam(model, o);
  adam.step(model, 0.1f);
  adam.step(model, 0.1f);
  const std::vector<float> after = model.parameters().to_vector();
  for (const GptParameter& p : model.parameter_table()) {
    const size_t i = static_cast<size_t>(p.offset);  // first element of each tensor
    double theta = before[i], m = 0, v = 0;
    const double grad = g[i];
    for (int t = 1; t <= 2; ++t) {
      if (decays(p.role)) theta *= 1 - 0.1 * 0.5;
      m = 0.9 * m + 0.1 * grad;
      v = 0.99 * v + 0.01 * grad * grad;
      theta -= 0.1 / (1 - std::pow(0.9, t)) * m /
               (std::sqrt(v) / std::sqrt(1 - std::pow(0.99, t)) + 1e-8);
    }
    EXPECT_NEAR(after[i], theta, 1e-6) << p.name;
  }
  EXPECT_EQ(adam.steps, 2);
}

TEST(ClipGradNorm, ScalesToTheLimitOnlyWhenAbove) {
  Gpt model(small_config(5), 1);
  float* g = model.gradients().data();
  model.zero_grad();
  g[0] = 3.0f;
  g[1] = 4.0f;
  EXPECT_FLOAT_EQ(clip_grad_norm(model, 10.0f), 5.0f);
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_FLOAT_EQ(clip_grad_norm(model, 1.0f), 5.0f);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);
  EXPECT_NEAR(g[1], 0.8f, 1e-6);
}

TEST_F(Training, ASmallModelLearnsAndTheRunIsDeterministic) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  TrainOptions o = small_options();
  o.max_iters = 60;
  std::vector<float> losses[2];
  for (int run = 0; run < 2; ++run) {
    Trainer trainer(small_config(tok.vocab_size()), o, corpus_tokens(tok, 40));
    const EvalResult start = trainer.evaluate();
    while (!trainer.done()) losses[run].push_back(trainer.step().loss);
    const EvalResult end = trainer.evaluate();
    EXPECT_NEAR(start.val_loss, std::log(static_cast<float>(tok.vocab_size())), 0.3f);
    EXPECT_LT(end.val_loss, 0.6f * start.val_loss) << "from " << start.val_loss;
  }
  EXPECT_EQ(losses[0], losses[1]);
}

// A TrainingGroup of one process that counts what the trainer asks of it.
class GroupOfOne final : public TrainingGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum(std::span<double>, const std::string& what) override { ++sums[what]; }
  void start_gradients(std::span<float> g) override { size_seen = static_cast<int64_t>(g.size()); }
  void gradients_final_from(int64_t offset) override { last_offset = offset; }
  void finish_gradients() override { ++finished; }
  bool same_on_every_rank(std::span<const float>) override { return true; }
  std::map<std::string, int64_t> sums;  // by the name each sum gives for its errors
  int finished = 0;
  int64_t size_seen = -1, last_offset = -1;
};

// The trainer's data-parallel path with a group of one process is a single process, to the
// bit: the same losses, evaluations and parameters (the MPI tests run it with 2 to 4).
TEST_F(Training, AGroupOfOneIsASingleProcessToTheBit) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  TrainOptions o = small_options();
  o.grad_accum = 2;
  GptConfig c = small_config(tok.vocab_size());
  c.dropout = 0.1f;
  Trainer alone(c, o, corpus_tokens(tok, 40));
  Trainer grouped(c, o, corpus_tokens(tok, 40));
  auto group = std::make_shared<GroupOfOne>();
  grouped.set_group(group);
  while (!alone.done()) {
    const StepResult a = alone.step(), b = grouped.step();
    EXPECT_EQ(a.loss, b.loss) << "iteration " << a.iter;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "iteration " << a.iter;
  }
  const EvalResult ea = alone.evaluate(), eb = grouped.evaluate();
  EXPECT_EQ(ea.val_loss, eb.val_loss);
  EXPECT_TRUE(testing::BitwiseEqual(alone.model().parameters(), grouped.model().parameters()));
  EXPECT_TRUE(grouped.replicas_agree());
  // One gradient sum per step (the last micro-batch's), the whole buffer, down to offset 0;
  // the loss summed once a step and each evaluation's batch losses once, each sum named.
  EXPECT_EQ(group->finished, o.max_iters);
  EXPECT_EQ(group->size_seen, grouped.model().num_parameters());
  EXPECT_EQ(group->last_offset, 0);
  const std::map<std::string, int64_t> expected_sums = {{"the loss sum", o.max_iters},
                                                        {"the evaluation loss sum", 2}};
  EXPECT_EQ(group->sums, expected_sums);
}

TEST(TrainerGroup, MoreProcessesThanWindowsAreRefused) {
  class Group final : public TrainingGroup {
   public:
    int rank() const override { return 0; }
    int size() const override { return 5; }
    void sum(std::span<double>, const std::string&) override {}
    void start_gradients(std::span<float>) override {}
    void gradients_final_from(int64_t) override {}
    void finish_gradients() override {}
    bool same_on_every_rank(std::span<const float>) override { return true; }
  };
  const CharTokenizer tok = CharTokenizer::train(kText);
  Trainer trainer(small_config(tok.vocab_size()), small_options(), corpus_tokens(tok, 40));
  EXPECT_TRUE(ThrowsWith([&] { trainer.set_group(std::make_shared<Group>()); },
                         "5 processes need a batch_size of at least as many windows, got 4"));
}

TEST_F(Training, ResumingGivesTheLossCurveOfAnUninterruptedRun) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  for (int64_t accum : {1, 2}) {
    TrainOptions o = small_options();
    o.grad_accum = accum;
    GptConfig c = small_config(tok.vocab_size());
    c.dropout = 0.1f;
    Trainer whole(c, o, corpus_tokens(tok, 20));
    std::vector<float> expected;
    while (!whole.done()) expected.push_back(whole.step().loss);

    Trainer first(c, o, corpus_tokens(tok, 20));
    std::vector<float> got;
    for (int i = 0; i < 3; ++i) got.push_back(first.step().loss);
    first.save(path("ckpt.safetensors"), tok);
    Trainer second = Trainer::resume(path("ckpt.safetensors"), corpus_tokens(tok, 20));
    EXPECT_EQ(second.iteration(), 3);
    while (!second.done()) got.push_back(second.step().loss);
    EXPECT_EQ(got, expected) << "grad_accum " << accum;
    EXPECT_TRUE(testing::BitwiseEqual(second.model().parameters(), whole.model().parameters()));

    // From the corpus text, with the tokenizer the checkpoint stored: the same run.
    std::string text;
    for (int i = 0; i < 20; ++i) text += kText;
    Trainer::Resumed third = Trainer::resume_on_text(path("ckpt.safetensors"), text);
    EXPECT_EQ(third.tokenizer.kind(), "char");
    EXPECT_EQ(third.trainer.token_count(), corpus_tokens(tok, 20).size());
    std::vector<float> from_text(got.begin(), got.begin() + 3);
    while (!third.trainer.done()) from_text.push_back(third.trainer.step().loss);
    EXPECT_EQ(from_text, expected) << "grad_accum " << accum;
  }
}

// In mixed precision too: the checkpoint keeps the precision, and the resumed run repeats
// the uninterrupted one bit for bit; it learns as the float run does.
TEST_F(Training, ABfloatRunResumesExactlyAndLearnsAsTheFloatRun) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  TrainOptions o = small_options();
  o.max_iters = 40;
  const GptConfig c = small_config(tok.vocab_size());
  Trainer f32(c, o, corpus_tokens(tok, 20));
  o.precision = Dtype::kBFloat16;
  Trainer whole(c, o, corpus_tokens(tok, 20));
  EXPECT_EQ(whole.model().training_precision(), Dtype::kBFloat16);
  std::vector<float> expected, float_losses;
  while (!whole.done()) expected.push_back(whole.step().loss);
  while (!f32.done()) float_losses.push_back(f32.step().loss);
  EXPECT_NE(expected, float_losses);
  EXPECT_NEAR(expected.back(), float_losses.back(), 0.05f * float_losses.back());

  Trainer first(c, o, corpus_tokens(tok, 20));
  std::vector<float> got;
  for (int i = 0; i < 5; ++i) got.push_back(first.step().loss);
  first.save(path("bf16.safetensors"), tok);
  Trainer second = Trainer::resume(path("bf16.safetensors"), corpus_tokens(tok, 20));
  EXPECT_EQ(second.options().precision, Dtype::kBFloat16);
  EXPECT_EQ(second.model().training_precision(), Dtype::kBFloat16);
  while (!second.done()) got.push_back(second.step().loss);
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(testing::BitwiseEqual(second.model().parameters(), whole.model().parameters()));
}

TEST_F(Training, ACheckpointLoadsForGeneration) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  Trainer trainer(small_config(tok.vocab_size()), small_options(), corpus_tokens(tok, 20));
  trainer.step();
  trainer.save(path("ckpt.safetensors"), tok);
  const Checkpoint ckpt = load_checkpoint(path("ckpt.safetensors"));
  EXPECT_EQ(ckpt.iteration, 1);
  EXPECT_EQ(ckpt.tokenizer.kind(), "char");
  EXPECT_EQ(ckpt.tokenizer.decode(ckpt.tokenizer.encode("the cat")), "the cat");
  EXPECT_TRUE(testing::BitwiseEqual(ckpt.model.parameters(), trainer.model().parameters()));
  // A BPE tokenizer is stored and restored as well.
  const BpeTokenizer bpe = BpeTokenizer::train(kText, {40, 2, false, {}});
  Trainer with_bpe(
      small_config(bpe.vocab_size()), small_options(),
      bpe.encode(std::string(20 * 90, ' ') + kText + kText + kText + kText + kText + kText));
  with_bpe.save(path("bpe.safetensors"), bpe);
  EXPECT_EQ(load_checkpoint(path("bpe.safetensors")).tokenizer.kind(), "bpe");
}

TEST_F(Training, BrokenCheckpointsFailClearly) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  Trainer trainer(small_config(tok.vocab_size()), small_options(), corpus_tokens(tok, 20));
  const std::string good = path("good.safetensors");
  trainer.save(good, tok);
  const Safetensors file = read_safetensors(good);

  auto rewrite = [&](const std::string& name, auto edit) {
    Safetensors copy = file;
    edit(copy);
    write_safetensors(path(name), copy.tensors, copy.metadata);
    return path(name);
  };
  const std::string foreign =
      rewrite("foreign", [](Safetensors& f) { f.metadata.erase("format"); });
  const std::string future = rewrite("future", [](Safetensors& f) { f.metadata["version"] = "9"; });
  const std::string missing =
      rewrite("missing", [](Safetensors& f) { f.tensors.erase(f.tensors.begin() + 1); });
  const std::string reshaped = rewrite("reshaped", [](Safetensors& f) {
    f.tensors[0].second = Tensor({2, 2});
  });
  const std::string bad_config =
      rewrite("config", [](Safetensors& f) { f.metadata["config"] = "{}"; });
  const std::string bad_tok =
      rewrite("tok", [](Safetensors& f) { f.metadata["tokenizer"] = "{\"format\":\"x\"}"; });
  const std::string bad_iter =
      rewrite("iter", [](Safetensors& f) { f.metadata["iteration"] = "-3"; });
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(foreign); }, "not an attn GPT checkpoint"));
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(future); }, "checkpoint version \"9\""));
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(missing); }, "is missing"));
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(reshaped); }, "the config needs"));
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(bad_config); }, "GptConfig"));
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(bad_tok); }, "unknown format"));
  EXPECT_TRUE(ThrowsWith([&] { Trainer::resume(bad_iter, corpus_tokens(tok, 20)); },
                         "non-negative integer"));
  EXPECT_TRUE(ThrowsWith([&] { Trainer::resume(good, corpus_tokens(tok, 21)); }, "corpus differs"));
  // A NaN among the weights or the moments is named, with its file and tensor, at load time.
  auto poisoned = [&](const std::string& tensor) {
    return rewrite("nan_" + tensor, [&](Safetensors& f) {
      for (auto& [name, t] : f.tensors) {
        if (name != tensor) continue;
        t = t.clone();
        t.data()[3] = std::numeric_limits<float>::quiet_NaN();
      }
    });
  };
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(poisoned("h.0.attn.wqkv")); },
                         path("nan_h.0.attn.wqkv") +
                             ": checkpoint: tensor \"h.0.attn.wqkv\" holds nan at flat index 3"));
  EXPECT_TRUE(
      ThrowsWith([&] { Trainer::resume(poisoned("optimizer.v.wte"), corpus_tokens(tok, 20)); },
                 "tensor \"optimizer.v.wte\" holds nan"));
  // A config that claims a model far larger than the file: refused before it is built (a 2^40-
  // float model would otherwise be allocated first).
  const std::string inflated = rewrite("inflated", [](Safetensors& f) {
    nlohmann::json config = nlohmann::json::parse(f.metadata["config"]);
    config["n_layer"] = 1024;
    config["n_embd"] = 32768;
    f.metadata["config"] = config.dump();
  });
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(inflated); }, "the config needs 1 × "));
  EXPECT_TRUE(ThrowsWith([&] { Trainer::resume(inflated, corpus_tokens(tok, 20)); },
                         "the config needs 3 × "));
  // Written before decay_embeddings existed: resumes, decaying no embedding.
  const std::string older = rewrite("older", [](Safetensors& f) {
    nlohmann::json options = nlohmann::json::parse(f.metadata["train_options"]);
    options.erase("decay_embeddings");
    f.metadata["train_options"] = options.dump();
  });
  EXPECT_FALSE(Trainer::resume(older, corpus_tokens(tok, 20)).options().adamw.decay_embeddings);
  // And before the precision option: a float run. An unknown precision is an error.
  const std::string no_precision = rewrite("no_precision", [](Safetensors& f) {
    nlohmann::json options = nlohmann::json::parse(f.metadata["train_options"]);
    options.erase("precision");
    f.metadata["train_options"] = options.dump();
  });
  EXPECT_EQ(Trainer::resume(no_precision, corpus_tokens(tok, 20)).options().precision,
            Dtype::kFloat32);
  const std::string fp16 = rewrite("fp16", [](Safetensors& f) {
    nlohmann::json options = nlohmann::json::parse(f.metadata["train_options"]);
    options["precision"] = "fp16";
    f.metadata["train_options"] = options.dump();
  });
  EXPECT_TRUE(ThrowsWith([&] { Trainer::resume(fp16, corpus_tokens(tok, 20)); },
                         "precision must be \"f32\" or \"bf16\", got \"fp16\""));
  // Truncated: the file's own reader reports it, with the path.
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path("cut"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(path("cut")); }, path("cut")));
}

// A learning rate far too large: the run stops at the first non-finite loss, saying when and
// at which rate, before AdamW applies any of it.
TEST(Trainer, ADivergingRunStopsWithTheIterationAndTheRate) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  TrainOptions o = small_options();
  o.lr = 1e10f;
  o.min_lr = 1e9f;
  o.max_iters = 50;
  Trainer trainer(small_config(tok.vocab_size()), o, corpus_tokens(tok, 20));
  std::string message;
  try {
    while (!trainer.done()) trainer.step();
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("training diverged at iteration "), std::string::npos) << message;
  EXPECT_NE(message.find(": the loss is nan (learning rate "), std::string::npos) << message;
}

TEST(ErrorMessage, ANanIsNanWhateverItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(detail::concat("loss ", -nan, ", ", nan, ", ", -1.5, ", ", 2),
            "loss nan, nan, -1.5, 2");
}

TEST(TrainerArguments, Errors) {
  const CharTokenizer tok = CharTokenizer::train(kText);
  EXPECT_TRUE(ThrowsWith(
      [&] { Trainer t(small_config(tok.vocab_size()), small_options(), corpus_tokens(tok, 1)); },
      "too few"));
  TrainOptions o = small_options();
  o.min_lr = 1.0f;
  EXPECT_TRUE(ThrowsWith(
      [&] { Trainer t(small_config(tok.vocab_size()), o, corpus_tokens(tok, 20)); }, "min_lr"));
  EXPECT_TRUE(
      ThrowsWith([&] { Trainer t(small_config(3), small_options(), corpus_tokens(tok, 20)); },
                 "outside the vocabulary"));
}

}  // namespace
}  // namespace attn
