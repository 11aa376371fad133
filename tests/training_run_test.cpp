// The training run every front end shares: when it evaluates and saves, what its callbacks
// hear, what metrics.csv holds, that a stop saves first and a resume continues the file as
// one run, and its arguments.
#include "attn/training_run.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attn/simd.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;
using TrainingRunTest = testing::TempDirTest;

const std::string kRunCorpus =
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog. the dog saw the cat.\n";

GptConfig tiny_config(int64_t vocab) {
  GptConfig c;
  c.vocab_size = vocab;
  c.block_size = 16;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

TrainOptions tiny_options(int64_t max_iters, int64_t eval_interval = 250) {
  TrainOptions o;
  o.eval_interval = eval_interval;
  o.batch_size = 2;
  o.max_iters = max_iters;
  o.warmup_iters = 1;
  o.eval_iters = 1;
  return o;
}

std::vector<int64_t> run_tokens(const CharTokenizer& tok) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += kRunCorpus;
  return tok.encode(text);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What the callbacks heard, in order: "e<iter>" an evaluation, "c" a checkpoint, "s<iter>" a
// finished step.
struct Heard {
  std::vector<std::string> events;
  TrainingCallbacks callbacks() {
    TrainingCallbacks cb;
    cb.evaluation = [this](int64_t iter, const EvalResult&) {
      events.push_back("e" + std::to_string(iter));
    };
    cb.checkpoint_written = [this] { events.push_back("c"); };
    cb.after_step = [this](const StepResult& r, double seconds) {
      EXPECT_GT(seconds, 0.0);
      events.push_back("s" + std::to_string(r.iter));
    };
    return cb;
  }
};

TEST_F(TrainingRunTest, EvaluatesFirstAtTheCadenceAndAtTheEndSavingEachTime) {
  const CharTokenizer tok = CharTokenizer::train(kRunCorpus);
  Trainer trainer(tiny_config(tok.vocab_size()), tiny_options(5, 2), run_tokens(tok));
  Heard heard;
  TrainingRun run(trainer, tok, {.dir = dir_.string()}, heard.callbacks());
  EXPECT_EQ(run.run(), RunEnd::kFinished);
  const std::vector<std::string> expected = {"e0", "c",  "s0", "s1", "e2", "c", "s2",
                                             "s3", "e4", "c",  "s4", "e5", "c"};
  EXPECT_EQ(heard.events, expected);
  EXPECT_EQ(run.steps_run(), 5);
  EXPECT_GT(run.step_seconds(), 0.0);
  EXPECT_EQ(load_checkpoint(run.checkpoint_path()).iteration, 5);
  // A header, a row per step and one per evaluation (val_loss filled, timing empty).
  const std::vector<std::string> rows = lines_of(path("metrics.csv"));
  ASSERT_EQ(rows.size(), 1u + 5 + 4);
  EXPECT_EQ(rows[0], "iter,train_loss,val_loss,lr,ms_per_iter,tokens_per_s");
  EXPECT_EQ(rows[1].substr(0, 2), "0,");
  EXPECT_TRUE(rows[1].ends_with(",,")) << rows[1];
  EXPECT_FALSE(rows[2].ends_with(",")) << rows[2];
}

TEST_F(TrainingRunTest, WithoutADirectoryItWritesNothing) {
  const CharTokenizer tok = CharTokenizer::train(kRunCorpus);
  Trainer trainer(tiny_config(tok.vocab_size()), tiny_options(3, 10), run_tokens(tok));
  Heard heard;
  TrainingRun run(trainer, tok, {}, heard.callbacks());
  EXPECT_EQ(run.run(), RunEnd::kFinished);
  const std::vector<std::string> expected = {"e0", "s0", "s1", "s2", "e3"};
  EXPECT_EQ(heard.events, expected);
  EXPECT_EQ(run.checkpoint_path(), "");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

// A stop between steps saves, and the resumed run ends where the uninterrupted one does,
// with the same losses and one metrics file that reads as one run.
TEST_F(TrainingRunTest, AStopSavesAndTheResumedRunIsTheUninterruptedOne) {
  const CharTokenizer tok = CharTokenizer::train(kRunCorpus);
  const GptConfig c = tiny_config(tok.vocab_size());
  const std::filesystem::path whole_dir = dir_ / "whole", parts_dir = dir_ / "parts";
  std::filesystem::create_directories(whole_dir);
  std::filesystem::create_directories(parts_dir);

  Trainer whole(c, tiny_options(7, 3), run_tokens(tok));
  std::vector<float> expected;
  TrainingCallbacks record;
  record.after_step = [&](const StepResult& r, double) { expected.push_back(r.loss); };
  TrainingRun(whole, tok, {.dir = whole_dir.string()}, record).run();

  Trainer first(c, tiny_options(7, 3), run_tokens(tok));
  std::vector<float> got;
  TrainingCallbacks stop_after_4;
  stop_after_4.after_step = [&](const StepResult& r, double) { got.push_back(r.loss); };
  stop_after_4.should_stop = [&] { return got.size() == 4; };
  TrainingRun interrupted(first, tok, {.dir = parts_dir.string()}, stop_after_4);
  EXPECT_EQ(interrupted.run(), RunEnd::kStopped);
  const std::string ckpt = interrupted.checkpoint_path();
  EXPECT_EQ(load_checkpoint(ckpt).iteration, 4);
  // A killed run's rows past the checkpoint, which the resume must drop.
  { std::ofstream(parts_dir / "metrics.csv", std::ios::app) << "5,9.9,,0.001,1.0,1.0\n"; }

  Trainer second = Trainer::resume(ckpt, run_tokens(tok));
  TrainingCallbacks rest;
  rest.after_step = [&](const StepResult& r, double) { got.push_back(r.loss); };
  TrainingRun resumed(second, tok, {.dir = parts_dir.string(), .resumed = true}, rest);
  EXPECT_EQ(resumed.run(), RunEnd::kFinished);
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(testing::BitwiseEqual(second.model().parameters(), whole.model().parameters()));

  // The same iterations and losses row by row; only the timing columns differ.
  const auto without_timing = [](const std::vector<std::string>& rows) {
    std::vector<std::string> kept;
    for (const std::string& row : rows) {
      size_t commas = 0, end = 0;
      while (end < row.size() && commas < 4) commas += row[end++] == ',';
      kept.push_back(row.substr(0, end));
    }
    return kept;
  };
  EXPECT_EQ(without_timing(lines_of((parts_dir / "metrics.csv").string())),
            without_timing(lines_of((whole_dir / "metrics.csv").string())));
}

TEST_F(TrainingRunTest, BfloatTrainingSaysWhenTheCpuRunsItsProductsInFloat) {
  const CharTokenizer tok = CharTokenizer::train(kRunCorpus);
  TrainOptions o = tiny_options(1);
  o.precision = Dtype::kBFloat16;
  Trainer trainer(tiny_config(tok.vocab_size()), o, run_tokens(tok));
  std::vector<std::string> notices;
  TrainingCallbacks cb;
  cb.notice = [&](const std::string& text) { notices.push_back(text); };
  TrainingRun run(trainer, tok, {}, cb);
  if (simd_has_bf16_products()) {
    EXPECT_TRUE(notices.empty());
    EXPECT_EQ(trainer.model().training_precision(), Dtype::kBFloat16);
  } else {
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("has no AVX-512 BF16"), std::string::npos) << notices[0];
    EXPECT_EQ(trainer.model().training_precision(), Dtype::kFloat32);
  }
  EXPECT_EQ(trainer.options().precision, Dtype::kBFloat16);  // so its checkpoint says bf16
}

TEST(TrainingRunArguments, Errors) {
  const CharTokenizer tok = CharTokenizer::train(kRunCorpus);
  Trainer trainer(tiny_config(tok.vocab_size()), tiny_options(1), run_tokens(tok));
  EXPECT_TRUE(
      ThrowsWith([&] { trainer.set_eval_interval(0); }, "eval_interval must be >= 1, got 0"));
  const CharTokenizer other = CharTokenizer::train("abc");
  EXPECT_TRUE(
      ThrowsWith([&] { TrainingRun(trainer, other, {}); },
                 "the tokenizer has 3 tokens, the model " + std::to_string(tok.vocab_size())));
}

}  // namespace
}  // namespace attn
