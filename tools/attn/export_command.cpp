// attn export --hf: a model in Hugging Face's GPT-2 layout, from a checkpoint of attn train or
// with random weights in the shape of one of OpenAI's GPT-2 models (for benchmarks: nothing is
// downloaded).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "attn/hf.hpp"
#include "attn/tokenizer.hpp"
#include "attn/train.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;
using Files = std::vector<std::pair<std::string, std::string>>;

struct ExportArgs {
  std::string hf, checkpoint, random, tokenizer;
  uint64_t seed = 0;
  bool no_tokenizer = false;
};

constexpr const char* kEndOfText = "<|endoftext|>";

// The id of <|endoftext|> when the checkpoint's tokenizer has it as a special token.
std::optional<int64_t> end_of_text_id(const Tokenizer& tokenizer) {
  const BpeTokenizer* bpe = tokenizer.bpe();
  if (bpe == nullptr) return std::nullopt;
  const std::vector<std::string>& specials = bpe->options().special_tokens;
  if (std::find(specials.begin(), specials.end(), kEndOfText) == specials.end()) return {};
  return bpe->token_to_id(kEndOfText);
}

// The checkpoint's tokenizer as tokenizer.json (byte-level BPE only), and a
// tokenizer_config.json that names the class reading tokenizer.json as it is: without it
// transformers' AutoTokenizer takes GPT-2's class from config.json, which splits words by
// GPT-2's pattern instead of attn's ("  of" would become three ids instead of one).
Files checkpoint_tokenizer(const Tokenizer& tokenizer, const ExportArgs& args) {
  if (args.no_tokenizer) return {};
  const BpeTokenizer* bpe = tokenizer.bpe();
  ATTN_CHECK(bpe != nullptr && bpe->options().byte_level, args.checkpoint, ": the tokenizer is ",
             bpe ? "character-mode BPE" : "character-level",
             "; Hugging Face's GPT-2 layout needs byte-level BPE (attn train --tokenizer bpe), "
             "or --no-tokenizer to write the model alone");
  nlohmann::ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}};
  if (end_of_text_id(tokenizer)) config["bos_token"] = config["eos_token"] = kEndOfText;
  return {{"tokenizer.json", bpe->to_hf_json()}, {"tokenizer_config.json", config.dump(2) + "\n"}};
}

// The GPT-2 tokenizer files Gpt2Tokenizer::load(dir) reads, checked by loading them, copied.
Files gpt2_tokenizer_files(const std::string& dir, int64_t model_vocab) {
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(dir);  // refuses anything else
  ATTN_CHECK(tokenizer.vocab_size() <= model_vocab, dir, ": the tokenizer has ",
             tokenizer.vocab_size(), " tokens, the model ", model_vocab);
  Files files;
  for (const std::string& path : Gpt2Tokenizer::files(dir)) {
    files.emplace_back(fs::path(path).filename().string(),
                       read_whole_file(path, kMaxTokenizerBytes));
  }
  return files;
}

// Writes the directory, then says what it holds (on stderr, as explore and heatmap do).
void write_hf(const Gpt& model, const std::string& dir, const Files& tokenizer,
              std::optional<int64_t> end_of_text) {
  save_hf(model, dir, tokenizer, end_of_text);
  std::string names = "config.json, model.safetensors";
  for (const auto& [name, bytes] : tokenizer) names += ", " + name;
  std::fprintf(stderr, "attn: wrote %s: %s (%lld parameters)\n", dir.c_str(), names.c_str(),
               static_cast<long long>(model.num_parameters()));
}

void run_export(const ExportArgs& args) {
  ATTN_CHECK(args.checkpoint.empty() != args.random.empty(),
             "give one of --checkpoint (a model of attn train) or --random (a GPT-2 shape)");
  std::error_code ec;
  ATTN_CHECK(!fs::exists(args.hf, ec) || fs::is_directory(args.hf, ec), args.hf,
             ": --hf must be a directory");
  if (!args.random.empty()) {
    const GptConfig config = gpt2_shape(args.random);
    // The model and the file's image exist at once (8 bytes a parameter); 12 leaves room.
    check_memory("--random " + args.random, 12.0 * static_cast<double>(parameter_count(config)));
    const Files tokenizer =
        args.tokenizer.empty() ? Files{} : gpt2_tokenizer_files(args.tokenizer, config.vocab_size);
    const Gpt model(config, args.seed);
    return write_hf(model, args.hf, tokenizer, config.vocab_size - 1);  // GPT-2's <|endoftext|>
  }
  ATTN_CHECK(args.tokenizer.empty(), "--tokenizer goes with --random; a checkpoint has its own");
  const Checkpoint ckpt = load_checkpoint(args.checkpoint);
  const Files tokenizer = checkpoint_tokenizer(ckpt.tokenizer, args);
  write_hf(ckpt.model, args.hf, tokenizer, end_of_text_id(ckpt.tokenizer));
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a model in Hugging Face's GPT-2 layout: config.json, model.safetensors (F32) and\n"
      "tokenizer.json, which 'attn generate --model DIR' (and Hugging Face's GPT2LMHeadModel)\n"
      "reads. From a checkpoint of 'attn train' (learned positions, biases, no GQA; a byte-level\n"
      "BPE tokenizer), or with random weights in a GPT-2 shape, for benchmarks.");
  ExportArgs& a = *args;
  cmd->add_option("--hf", a.hf, "the directory to write (created if missing)")
      ->type_name("DIR")
      ->required();
  CLI::Option* checkpoint =
      cmd->add_option("--checkpoint", a.checkpoint,
                      "a training directory of attn train or its checkpoint.safetensors");
  cmd->add_option("--random", a.random,
                  "instead: random weights (GPT-2's initialisation) in the shape of gpt2 (124M), "
                  "gpt2-medium, gpt2-large or gpt2-xl")
      ->type_name("SHAPE")
      ->excludes(checkpoint);
  cmd->add_option("--tokenizer", a.tokenizer,
                  "with --random: a directory of GPT-2's tokenizer files to copy beside the model")
      ->type_name("DIR");
  cmd->add_option("--seed", a.seed, "with --random: the seed of the weights")
      ->check(unsigned_integer())
      ->capture_default_str();
  cmd->add_flag("--no-tokenizer", a.no_tokenizer,
                "with --checkpoint: write the model alone (e.g. for a character-level tokenizer)");
  cmd->callback([args] { run_export(*args); });
}

}  // namespace attn::cli
