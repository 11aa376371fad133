// attn demo: the whole walk-through on a built-in corpus, no files needed.
//   text -> BPE ids -> token embeddings + sinusoidal positions -> causal multi-head attention
//   -> shapes, the head-0 heat map, and the checks that prove it works.
// Any failed check makes the command exit non-zero.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/tokenizer.hpp"
#include "attn/train.hpp"
#include "attn/viz.hpp"
#include "attn/walkthrough.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

constexpr const char* kText = "the quick brown fox jumps over the lazy dog";

struct DemoArgs {
  std::string text = kText, impl = "fused";
  std::string html = "demo_attention.html";  // empty: none
  int64_t d_model = 16, heads = 4;
  uint64_t seed = 7;
  int threads = 0;
};

// The tutorial's tokenizer: BPE with vocab_size 80 and min_frequency 2, trained on its corpus
// plus the text (so that every character of the text is known).
struct Tokens {
  BpeTokenizer tokenizer;
  std::vector<int64_t> ids;
  std::vector<std::string> shown;  // each token made visible, for the heat map
};

Tokens tokenize(const std::string& text) {
  ATTN_CHECK(!text.empty(), "demo: --text is empty");
  BpeOptions options;
  options.vocab_size = 80;
  options.min_frequency = 2;
  Tokens t{BpeTokenizer::train(std::string(tutorial_corpus()) + text, options), {}, {}};
  t.ids = t.tokenizer.encode(text);
  for (int64_t id : t.ids) t.shown.push_back(t.tokenizer.display(id));
  return t;
}

void section(const char* title) { std::printf("\n== %s\n", title); }

// Largest |row sum − 1| over every row of the weights.
double worst_row_sum_error(const Tensor& weights) {
  const std::vector<float> w = weights.to_vector();
  const int64_t n = weights.dim(-1);
  double worst = 0.0;
  for (size_t r = 0; r < w.size(); r += n) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += w[r + j];
    worst = std::max(worst, std::fabs(sum - 1.0));
  }
  return worst;
}

struct Weights {
  Tensor wq, wk, wv, wo;
};

void check_causal_invariance(const Tensor& x, const Weights& w, const DemoArgs& args,
                             const Tensor& output) {
  const int64_t t_len = x.dim(1);
  Tensor perturbed = x.clone();
  Tensor noise = rand_normal({x.dim(2)}, args.seed + 100);
  for (int64_t c = 0; c < x.dim(2); ++c) perturbed.at({0, t_len - 1, c}) += noise.at({c});
  SdpaOptions causal;
  causal.causal = true;
  const Tensor changed =
      mha_with(args.impl, perturbed, w.wq, w.wk, w.wv, w.wo, args.heads, causal).output;
  int64_t differing_earlier = 0;
  for (int64_t t = 0; t + 1 < t_len; ++t) {
    for (int64_t c = 0; c < output.dim(2); ++c) {
      differing_earlier += changed.at({0, t, c}) != output.at({0, t, c});
    }
  }
  float last_change = 0.0f;
  for (int64_t c = 0; c < output.dim(2); ++c) {
    last_change = std::max(last_change,
                           std::fabs(changed.at({0, t_len - 1, c}) - output.at({0, t_len - 1, c})));
  }
  std::printf("perturbed the last token's vector; outputs at positions 0..%lld: %s\n",
              static_cast<long long>(t_len - 2),
              differing_earlier == 0 ? "bitwise identical" : "CHANGED");
  std::printf("output at the last position moved by up to %.4f (it may: it sees itself)\n",
              last_change);
  ATTN_CHECK(differing_earlier == 0, "demo: causal invariance failed: ", differing_earlier,
             " earlier output values changed");
}

void check_known_answer(const std::string& impl) {
  const MatchingKeyExample e = matching_key_example();
  SdpaOptions with_weights;
  with_weights.return_weights = true;
  const SdpaResult r = sdpa_with(impl, e.q, e.k, e.v, with_weights);
  std::printf("q = (5, 5, 0, 0) matches key 2 = (1, 1, 0, 0); values (1, 2, 99, 4, 5); d_k = 4\n");
  std::printf("weights:");
  for (int64_t j = 0; j < 5; ++j) std::printf(" %.4f", r.weights.at({0, j}));
  const float w2 = r.weights.at({0, 2}), out = r.output.at({0, 0});
  std::printf("\noutput: %.2f — key 2 dominates (weight %.4f), yet the output is not 99\n", out,
              w2);
  ATTN_CHECK(std::fabs(w2 - 0.8024f) < 5e-5f && std::fabs(out - 80.10f) < 0.01f,
             "demo: known answer failed: weight ", w2, " (expected 0.8024), output ", out,
             " (expected ≈ 80.10)");
}

// The tutorial's last step: attention stacked into a small GPT, trained on the built-in corpus
// (repeated, so that both the training and the validation split hold whole lines) and sampled.
void train_tiny_gpt(uint64_t seed) {
  section("6. a small GPT trained on the corpus (2 layers, 2 heads, n_embd 32, 150 steps)");
  std::string corpus;
  for (int i = 0; i < 10; ++i) corpus += tutorial_corpus();
  const CharTokenizer chars = CharTokenizer::train(corpus);
  GptConfig config;
  config.vocab_size = chars.vocab_size();
  config.block_size = 32;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 32;
  TrainOptions options;
  options.batch_size = 8;
  options.max_iters = 150;
  options.warmup_iters = 10;
  options.lr = 3e-3f;
  options.min_lr = 3e-4f;
  options.eval_iters = 4;
  options.seed = seed;
  Trainer trainer(config, options, chars.encode(corpus), seed);
  const EvalResult before = trainer.evaluate();
  const auto start = std::chrono::steady_clock::now();
  while (!trainer.done()) trainer.step();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const EvalResult after = trainer.evaluate();
  std::printf("%lld parameters; val loss %.3f -> %.3f in %.2f s\n",
              static_cast<long long>(trainer.model().num_parameters()), before.val_loss,
              after.val_loss, seconds);
  ATTN_CHECK(after.val_loss < 0.5f * before.val_loss, "demo: the GPT did not learn (val loss ",
             before.val_loss, " -> ", after.val_loss, ")");
  GenerateOptions generation;
  generation.max_new_tokens = 80;
  generation.sampling.temperature = 0.0f;  // greedy: the most likely continuation
  const std::vector<int64_t> sample =
      generate(trainer.model(), chars.encode("the quick"), generation);
  std::printf("greedy sample: \"the quick%s\"\n", chars.decode(sample).c_str());
}

// Every head of step 3 as the explorer page, and where it is.
void write_explorer(const std::string& path, const Tensor& heads,
                    const std::vector<std::string>& tokens) {
  ExplorerOptions options;
  options.title = "attn demo: causal multi-head attention";
  options.subtitle = "random embeddings and projections (not trained): the weights of every head";
  write_file_atomically(path, explorer_html(heads, tokens, options));
  std::error_code ec;
  std::printf("every head, to explore in a browser: file://%s\n",
              std::filesystem::absolute(path, ec).c_str());
}

void run_demo(const DemoArgs& args) {
  apply_threads(args.threads);
  ATTN_CHECK(args.d_model % args.heads == 0, "--d-model (", args.d_model,
             ") must divide by --heads (", args.heads, ")");
  // The four projections (d_model²) dominate what the demo holds.
  check_memory("--d-model " + std::to_string(args.d_model),
               4.0 * double(args.d_model) * double(args.d_model) * sizeof(float));
  std::printf("attn demo: causal multi-head attention, step by step\n");

  section("1. tokens: BPE trained on the tutorial's corpus (vocab_size 80, min_frequency 2)");
  const Tokens tokens = tokenize(args.text);
  std::printf("text: \"%s\"\n%zu tokens:", args.text.c_str(), tokens.ids.size());
  for (size_t i = 0; i < tokens.ids.size(); ++i) {
    std::printf(" %s(%lld)", tokens.shown[i].c_str(), static_cast<long long>(tokens.ids[i]));
  }
  std::printf(
      "\nvocabulary of %lld tokens (\u2581 marks a space); decode gives the text back: %s\n",
      static_cast<long long>(tokens.tokenizer.vocab_size()),
      tokens.tokenizer.decode(tokens.ids) == args.text ? "yes" : "NO");
  ATTN_CHECK(tokens.tokenizer.decode(tokens.ids) == args.text,
             "demo: decode(encode(text)) differs");

  section("2. token embeddings + sinusoidal positions");
  const TokenEmbedding embedding(tokens.tokenizer.vocab_size(), args.d_model, args.seed);
  const auto t_len = static_cast<int64_t>(tokens.ids.size());
  const PositionalEncoding positions(t_len, args.d_model);
  const Tensor x = positions.add_to(embedding.forward(tokens.ids, /*batch=*/1));
  std::printf("TokenEmbedding %s, X = embedding[ids] + PE[0:T]  %s\n",
              embedding.weight.shape_string().c_str(), x.shape_string().c_str());

  section("3. causal multi-head attention");
  const float init = 1.0f / std::sqrt(static_cast<float>(args.d_model));
  const Weights w{rand_normal({args.d_model, args.d_model}, args.seed + 1, 0.f, init),
                  rand_normal({args.d_model, args.d_model}, args.seed + 2, 0.f, init),
                  rand_normal({args.d_model, args.d_model}, args.seed + 3, 0.f, init),
                  rand_normal({args.d_model, args.d_model}, args.seed + 4, 0.f, init)};
  SdpaOptions causal;
  causal.causal = true;
  causal.return_weights = true;  // for the heat map and the row-sum check
  const MhaResult r = mha_with(args.impl, x, w.wq, w.wk, w.wv, w.wo, args.heads, causal);
  std::printf("Wq, Wk, Wv, Wo %s; %lld heads of d_head %lld\n", w.wq.shape_string().c_str(),
              static_cast<long long>(args.heads),
              static_cast<long long>(args.d_model / args.heads));
  std::printf("split heads: Q %s\nweights %s\noutput  %s\n",
              split_heads(x, args.heads).shape_string().c_str(), r.weights.shape_string().c_str(),
              r.output.shape_string().c_str());

  section("4. head 0 attention weights (rows = queries, columns = keys)");
  HeatmapOptions map;
  map.row_labels = tokens.shown;
  map.column_labels = tokens.shown;
  std::fputs(heatmap_ascii(r.weights.select(0).select(0), map).c_str(), stdout);
  if (!args.html.empty()) write_explorer(args.html, r.weights.select(0), tokens.shown);

  section("5. checks");
  const double row_error = worst_row_sum_error(r.weights);
  std::printf("every row of weights sums to 1: worst |sum - 1| = %.2e\n", row_error);
  ATTN_CHECK(row_error < 1e-6, "demo: weight rows do not sum to 1 (", row_error, ")");
  check_causal_invariance(x, w, args, r.output);
  check_known_answer(args.impl);
  train_tiny_gpt(args.seed);
  std::printf("\nall checks passed\n");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "The walk-through on a built-in sentence: a BPE tokenizer trained on the tutorial's\n"
      "corpus, token embeddings, positions, causal multi-head attention, a heat map and the\n"
      "checks. No files needed; writes the heads' explorer page (--html).");
  cmd->add_option(
         "--text", args->text,
         "the sentence to use (the tokenizer also trains on it, so no character is unknown)")
      ->capture_default_str();
  cmd->add_option("--d-model", args->d_model, "model width")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--heads", args->heads, "number of heads; must divide --d-model")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--html", args->html, "the explorer page of every head to write ('': none)")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the random embeddings and weights")
      ->check(unsigned_integer())
      ->capture_default_str();
  add_impl_option(*cmd, args->impl);
  add_threads_option(*cmd, args->threads);
  cmd->callback([args] { run_demo(*args); });
}

}  // namespace attn::cli
