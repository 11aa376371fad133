// attn bpe train | encode | decode: the BPE tokenizer on files.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "hot/id_writer.hpp"
#include "id_parser.hpp"
#include "progress_bar.hpp"

namespace attn::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct BpeTrainArgs {
  std::string corpus, out;
  BpeOptions options;
  int threads = 0;
};

void run_train(BpeTrainArgs& args) {
  if (args.threads > 0) set_num_threads(args.threads);
  const std::string corpus = read_input(args.corpus, kMaxCorpusBytes);
  ATTN_CHECK(!corpus.empty(), "--corpus ", args.corpus, ": the corpus is empty");
  ProgressBar bar;
  const Clock::time_point start = Clock::now();
  const BpeTokenizer t =
      BpeTokenizer::train(corpus, args.options, [&](int64_t done, int64_t total) {
        const double elapsed = seconds_since(start);
        char detail[64];
        std::snprintf(detail, sizeof detail, "merges  %.2f s  %.0f merges/s", elapsed,
                      elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0);
        bar.update(done, total, detail);
      });
  const double seconds = seconds_since(start);
  bar.finish();
  write_output(args.out, t.to_json());
  std::fprintf(args.out == "-" ? stderr : stdout,
               "trained %lld tokens (%zu merges, %zu special) on %.2f MB in %.2f s; wrote %s\n",
               static_cast<long long>(t.vocab_size()), t.merges().size(),
               t.options().special_tokens.size(), static_cast<double>(corpus.size()) / 1e6, seconds,
               args.out == "-" ? "standard output" : args.out.c_str());
}

struct CodecArgs {
  std::string tokenizer, input = "-";
  int threads = 0;
  bool stats = false, tokens = false;
};

// GPT-2's files rather than a tokenizer of attn bpe train: a directory, one of encoder.json,
// vocab.json, merges.txt, vocab.bpe, or a file called tokenizer.json (Hugging Face's name).
bool is_gpt2(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return true;
  const std::string name = std::filesystem::path(path).filename().string();
  for (const char* gpt2 :
       {"encoder.json", "vocab.json", "merges.txt", "vocab.bpe", "tokenizer.json"})
    if (name == gpt2) return true;
  return false;
}

void print_stats(size_t tokens, size_t bytes, double seconds, const char* timed) {
  std::printf("%zu tokens, %zu bytes, %.3f bytes per token, %.1f MB/s (%d threads; %s)\n", tokens,
              bytes, tokens == 0 ? 0.0 : static_cast<double>(bytes) / static_cast<double>(tokens),
              seconds > 0 ? static_cast<double>(bytes) / seconds / 1e6 : 0.0, num_threads(), timed);
}

// GPT-2: the input is read whole (at most kMaxCorpusBytes), then encoded on the threads
// (Gpt2Tokenizer::encode_parallel); --stats times the encoding alone.
void run_encode_gpt2(const CodecArgs& args) {
  const Gpt2Tokenizer t = Gpt2Tokenizer::load(args.tokenizer);
  const std::string text = read_input(args.input, kMaxCorpusBytes);
  const Clock::time_point start = Clock::now();
  const std::vector<int64_t> ids = t.encode_parallel(text);
  const double seconds = seconds_since(start);
  if (args.stats) return print_stats(ids.size(), text.size(), seconds, "encoding only");
  if (args.tokens) {
    std::string shown;
    for (const int64_t id : ids) shown += (shown.empty() ? "" : " ") + t.display(id);
    return write_stdout(shown + "\n");
  }
  IdWriter writer;
  writer.write(ids);
  writer.finish();
}

// The input is read and encoded 16 KiB at a time and the ids written as they come: memory
// stays at a block of text and its ids whatever the size of the file.
void run_encode(const CodecArgs& args) {
  if (args.threads > 0) set_num_threads(args.threads);
  if (is_gpt2(args.tokenizer)) return run_encode_gpt2(args);
  const BpeTokenizer t = BpeTokenizer::load(args.tokenizer);
  IdWriter writer;
  size_t tokens = 0, bytes = 0;
  std::string shown;  // --tokens: the tokens as the tokenizer displays them
  BpeStreamEncoder encoder(t, [&](std::span<const int64_t> ids) {
    tokens += ids.size();
    if (args.tokens) {
      for (int64_t id : ids) shown += (shown.empty() ? "" : " ") + t.display(id);
      if (shown.size() >= (1u << 14)) {
        write_stdout(shown + " ");
        shown.clear();
      }
    } else if (!args.stats) {
      writer.write(ids);
    }
  });
  const Clock::time_point start = Clock::now();
  read_chunks(args.input, [&](std::string_view chunk) {
    bytes += chunk.size();
    encoder.write(chunk);
  });
  encoder.finish();
  const double seconds = seconds_since(start);
  if (args.stats) return print_stats(tokens, bytes, seconds, "reading included");
  if (args.tokens) {
    write_stdout(shown + "\n");
    return;
  }
  writer.finish();
}

// Read, decoded and written 16 KiB at a time.
void decode_stream(const Tokenizer& t, const CodecArgs& args) {
  IdParser parser;
  std::vector<int64_t> ids;
  read_chunks(args.input, [&](std::string_view chunk) {
    ids.clear();
    parser.feed(chunk, ids);
    write_stdout(t.decode(ids));
  });
  ids.clear();
  parser.finish(ids);
  write_stdout(t.decode(ids));
}

void run_decode(const CodecArgs& args) {
  decode_stream(is_gpt2(args.tokenizer) ? Tokenizer(Gpt2Tokenizer::load(args.tokenizer))
                                        : Tokenizer(BpeTokenizer::load(args.tokenizer)),
                args);
}

}  // namespace

void add_bpe_command(CLI::App& app) {
  CLI::App* bpe = app.add_subcommand(
      "bpe",
      "The BPE tokenizer: attn bpe train --help, attn bpe encode --help, attn bpe decode --help");
  bpe->require_subcommand(1);

  auto train = std::make_shared<BpeTrainArgs>();
  CLI::App* tr = bpe->add_subcommand(
      "train",
      "Learn a BPE tokenizer from a text file and write it as JSON. A progress bar on a\n"
      "terminal, then one summary line.");
  tr->add_option("--corpus", train->corpus, "the text to learn from (- for standard input)")
      ->required();
  tr->add_option("--vocab-size", train->options.vocab_size,
                 "tokens at most: special tokens + base alphabet + merges")
      ->required()
      ->check(in_range(1, int64_t{1} << 24));
  tr->add_option("--min-frequency", train->options.min_frequency,
                 "stop when no pair occurs this often")
      ->capture_default_str()
      ->check(positive());
  tr->add_flag("--byte-level", train->options.byte_level,
               "base alphabet of the 256 bytes (nothing is ever unknown); default: the corpus's "
               "characters, unseen ones become <unk>");
  tr->add_option("--special", train->options.special_tokens,
                 "special tokens, never split (e.g. --special '<|endoftext|>')");
  tr->add_option("--out", train->out, "where to write the tokenizer (JSON; '-': standard output)")
      ->required();
  tr->add_option("--threads", train->threads, "threads for counting words (default: all cores)")
      ->check(in_range(1, kMaxThreads));
  tr->footer(
      "Example: attn bpe train --corpus input.txt --vocab-size 4096 --byte-level --out tok.json");
  tr->callback([train] { run_train(*train); });

  auto enc = std::make_shared<CodecArgs>();
  CLI::App* en = bpe->add_subcommand(
      "encode",
      "Write the token ids of a file (or standard input) as decimal integers separated by single\n"
      "spaces, or with --stats the token count, bytes per token and MB/s.");
  en->add_option("--tokenizer", enc->tokenizer,
                 "a tokenizer file from attn bpe train, or GPT-2's: a directory with "
                 "tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe, or one of "
                 "those files")
      ->type_name("FILE|DIR")
      ->required();
  en->add_option("input", enc->input, "the text (- or nothing: standard input)");
  en->add_option("--threads", enc->threads, "threads (default: all cores)")
      ->check(in_range(1, kMaxThreads));
  CLI::Option* stats = en->add_flag("--stats", enc->stats, "print statistics instead of the ids");
  en->add_flag("--tokens", enc->tokens,
               "print the tokens as the tokenizer displays them (a space as 'Ġ', a newline as "
               "'Ċ'), separated by spaces, instead of their ids: labels for attn heatmap --tokens")
      ->excludes(stats);
  en->footer(
      "Example: attn bpe encode --tokenizer tok.json input.txt | attn bpe decode --tokenizer "
      "tok.json -");
  en->callback([enc] { run_encode(*enc); });

  auto dec = std::make_shared<CodecArgs>();
  CLI::App* de = bpe->add_subcommand(
      "decode",
      "Read token ids separated by any whitespace; write the exact bytes they stand for.");
  de->add_option("--tokenizer", dec->tokenizer,
                 "a tokenizer file from attn bpe train, or GPT-2's files (as for encode)")
      ->type_name("FILE|DIR")
      ->required();
  de->add_option("input", dec->input, "the ids (- or nothing: standard input)");
  de->callback([dec] { run_decode(*dec); });
}

}  // namespace attn::cli
