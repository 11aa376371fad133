// attn generate: text from a trained checkpoint, streamed token by token through the KV cache.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/hf.hpp"
#include "attn/threads.hpp"
#include "attn/train.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint, model, prompt, prompt_file, weights = "f32", cache_dtype = "f32";
  GenerateOptions options;
  int64_t num_samples = 1;
  bool no_cache = false, stats = false;
  int threads = 0;
};

void write_text(const std::string& text) {
  ATTN_CHECK(
      std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0,
      "cannot write to standard output");
}

void generate_with(const Gpt& model, const Tokenizer& tokenizer, GenerateArgs& args) {
  const std::string text =
      args.prompt_file.empty() ? args.prompt : read_input(args.prompt_file, kMaxPromptBytes);
  ATTN_CHECK(args.prompt_file.empty() || !text.empty(), args.prompt_file, ": the prompt is empty");
  const std::vector<int64_t> prompt =
      text.empty() ? tokenizer.default_prompt() : tokenizer.encode(text);
  args.options.use_cache = !args.no_cache;
  args.options.cache_dtype = dtype_from_string(args.cache_dtype, "--cache-dtype");
  size_t total_tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  // Sample i draws from seed + i: each is reproducible on its own, and they differ.
  const uint64_t first_seed = args.options.seed;
  for (int64_t sample = 0; sample < args.num_samples; ++sample) {
    if (sample > 0) write_text("\n---\n");
    if (!text.empty()) write_text(text);
    args.options.seed = first_seed + static_cast<uint64_t>(sample);
    total_tokens += generate(model, prompt, args.options, [&](int64_t id) {
                      const int64_t one[] = {id};
                      write_text(tokenizer.decode(one));
                    }).size();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_text("\n");
  // The pace, by default when a person watches (stderr on a terminal), or on request.
  if (args.stats || ::isatty(STDERR_FILENO) == 1) {
    std::fprintf(stderr, "%zu tokens in %.3f s: %.0f tokens/s (%s)\n", total_tokens, seconds,
                 seconds > 0 ? static_cast<double>(total_tokens) / seconds : 0.0,
                 args.no_cache ? "re-running the window" : "KV cache");
  }
}

void run_generate(GenerateArgs& args) {
  if (args.threads > 0) set_num_threads(args.threads);
  ATTN_CHECK(args.checkpoint.empty() != args.model.empty(),
             "give one of --checkpoint (a model of attn train) or --model (GPT-2's files)");
  const Dtype weights = weights_dtype_from_string(args.weights);
  if (!args.model.empty()) {
    HfGpt2 gpt2 = load_hf_gpt2(args.model);
    gpt2.model.set_weights_dtype(weights);
    return generate_with(gpt2.model, Tokenizer(std::move(gpt2.tokenizer)), args);
  }
  Checkpoint ckpt = load_checkpoint(args.checkpoint);
  ckpt.model.set_weights_dtype(weights);
  generate_with(ckpt.model, ckpt.tokenizer, args);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a model from 'attn train' (--checkpoint) or GPT-2's (--model),\n"
      "printing each token as it comes. One token per step through the KV cache; past the block\n"
      "size the context restarts from its last half. Without --prompt, generation starts from a\n"
      "newline (GPT-2: from <|endoftext|>; a vocabulary without a newline: its first token).");
  GenerateArgs& a = *args;
  a.options.max_new_tokens = 500;
  a.options.sampling.temperature = 0.8f;
  a.options.sampling.top_k = 200;
  CLI::Option* checkpoint = cmd->add_option("--checkpoint", a.checkpoint,
                                            "a training directory or its checkpoint.safetensors");
  cmd->add_option("--model", a.model,
                  "instead of --checkpoint: a GPT-2 model in Hugging Face's layout, a directory "
                  "with config.json, model.safetensors and GPT-2's tokenizer files")
      ->type_name("DIR")
      ->excludes(checkpoint);
  CLI::Option* prompt = cmd->add_option("--prompt", a.prompt, "text to continue");
  cmd->add_option("--prompt-file", a.prompt_file, "continue the text of FILE ('-': stdin)")
      ->excludes(prompt);
  cmd->add_option("--num-samples", a.num_samples,
                  "continuations to write, separated by a line '---'; sample i uses seed + i")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", a.options.max_new_tokens, "tokens to generate")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--temperature", a.options.sampling.temperature,
                  "0 = greedy; higher = more random")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--top-k", a.options.sampling.top_k,
                  "draw from the k most likely tokens (0 = all)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--top-p", a.options.sampling.top_p,
                  "nucleus sampling: draw from the most likely tokens whose probabilities first "
                  "reach p together (1 = off)")
      ->check(in_range(0, 1, /*lo_open=*/true))
      ->capture_default_str();
  cmd->add_option("--seed", a.options.seed, "sampling seed: the same seed gives the same text")
      ->check(unsigned_integer())
      ->capture_default_str();
  cmd->add_option("--weights", a.weights,
                  "f32, or bf16: the matrices kept in bfloat16 — half the memory and half the\n"
                  "bytes read per token, at bf16's 8-bit precision")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--cache-dtype", a.cache_dtype,
                  "the KV cache's storage: f32; bf16 (half the bytes read per token); or q8,\n"
                  "int8 rows with one bfloat16 scale each (about a quarter)")
      ->check(CLI::IsMember({"f32", "bf16", "q8"}))
      ->capture_default_str();
  cmd->add_flag("--no-cache", a.no_cache,
                "re-run the whole window for every token (slow; for comparison)");
  cmd->add_flag("--stats", a.stats,
                "print tokens per second to stderr (done by default when stderr is a terminal)");
  add_threads_option(*cmd, a.threads);
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace attn::cli
