// attn generate: text from a trained checkpoint, streamed token by token through the KV cache.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "attn/train.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint, prompt;
  GenerateOptions options;
  bool no_cache = false, stats = false;
  int threads = 0;
};

void write_text(const std::string& text) {
  ATTN_CHECK(
      std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0,
      "cannot write to standard output");
}

void run_generate(GenerateArgs& args) {
  if (args.threads > 0) set_num_threads(args.threads);
  std::string path = args.checkpoint;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) path += "/checkpoint.safetensors";
  const Checkpoint ckpt = load_checkpoint(path);
  std::vector<int64_t> prompt = ckpt.tokenizer.encode(args.prompt.empty() ? "\n" : args.prompt);
  if (!args.prompt.empty()) write_text(args.prompt);
  args.options.use_cache = !args.no_cache;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> tokens = generate(ckpt.model, prompt, args.options, [&](int64_t id) {
    const int64_t one[] = {id};
    write_text(ckpt.tokenizer.decode(one));
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_text("\n");
  if (args.stats) {
    std::fprintf(stderr, "%zu tokens in %.3f s: %.0f tokens/s (%s)\n", tokens.size(), seconds,
                 seconds > 0 ? static_cast<double>(tokens.size()) / seconds : 0.0,
                 args.no_cache ? "re-running the window" : "KV cache");
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a model from 'attn train', printing each token as it comes. One\n"
      "token per step through the KV cache; past the block size the context restarts from its\n"
      "last half. Without --prompt, generation starts from a newline.");
  GenerateArgs& a = *args;
  a.options.max_new_tokens = 500;
  a.options.sampling.temperature = 0.8f;
  a.options.sampling.top_k = 200;
  cmd->add_option("--checkpoint", a.checkpoint,
                  "a training directory or its checkpoint.safetensors")
      ->required();
  cmd->add_option("--prompt", a.prompt, "text to continue");
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
  cmd->add_option("--seed", a.options.seed, "sampling seed: the same seed gives the same text")
      ->capture_default_str();
  cmd->add_flag("--no-cache", a.no_cache,
                "re-run the whole window for every token (slow; for comparison)");
  cmd->add_flag("--stats", a.stats, "print tokens per second to stderr");
  add_threads_option(*cmd, a.threads);
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace attn::cli
