// attn bench tokenizer: GPT-2's tokenizer on one text, three ways, for each thread count —
// encode (one call, one thread), encode_parallel (one long text cut where the words allow) and
// encode_batch (the text as documents, each encoded on its own) — in MB/s, each against the
// single-threaded encode of the same run.
#include <cstdio>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "attn/threads.hpp"
#include "bench_util.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct TokenizerBenchArgs {
  std::string tokenizer, corpus;
  int64_t copies = 1, document_bytes = 4096;
  std::vector<int> threads;
  int runs = 3;
  bool json = false;
};

// The text cut into documents of about `bytes` each, every cut after a newline when one is
// near (a document is then whole lines, as a corpus of files would be).
std::vector<std::string> documents(const std::string& text, int64_t bytes) {
  std::vector<std::string> docs;
  const auto size = static_cast<size_t>(bytes);
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.size(), start + size);
    const size_t newline = text.rfind('\n', end - 1);
    if (end < text.size() && newline != std::string::npos && newline > start) end = newline + 1;
    docs.push_back(text.substr(start, end - start));
    start = end;
  }
  return docs;
}

size_t count_ids(const std::vector<std::vector<int64_t>>& batches) {
  size_t n = 0;
  for (const auto& b : batches) n += b.size();
  return n;
}

void run_bench_tokenizer(const TokenizerBenchArgs& args) {
  const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(args.tokenizer);
  const std::string one = read_input(args.corpus, kMaxCorpusBytes);
  ATTN_CHECK(!one.empty(), "--corpus ", args.corpus, ": the corpus is empty");
  check_memory("--copies " + std::to_string(args.copies),
               2.0 * static_cast<double>(one.size()) * static_cast<double>(args.copies));
  std::string text;
  for (int64_t i = 0; i < args.copies; ++i) text += one;
  const std::vector<std::string> docs = documents(text, args.document_bytes);
  const double mb = static_cast<double>(text.size()) / 1e6;

  set_num_threads(1);
  size_t ids = 0;
  const double serial_ms = median_ms(args.runs, [&] { ids = tokenizer.encode(text).size(); });
  if (!args.json) {
    std::printf(
        "GPT-2's tokenizer on %.1f MB (%zu ids; %zu documents of ~%lld bytes for "
        "encode_batch)\n",
        mb, ids, docs.size(), static_cast<long long>(args.document_bytes));
    std::printf("%-16s %7s %9s %9s\n", "", "threads", "MB/s", "vs encode");
    std::printf("%-16s %7d %9.1f %9.2f\n", "encode", 1, mb / serial_ms * 1e3, 1.0);
  }
  for (const int threads : thread_counts_or_all(args.threads)) {
    set_num_threads(threads);
    size_t parallel_ids = 0, batch_ids = 0;
    const double parallel_ms =
        median_ms(args.runs, [&] { parallel_ids = tokenizer.encode_parallel(text).size(); });
    const double batch_ms =
        median_ms(args.runs, [&] { batch_ids = count_ids(tokenizer.encode_batch(docs)); });
    ATTN_CHECK(parallel_ids == ids, "bench: encode_parallel gave ", parallel_ids, " ids, encode ",
               ids);
    if (args.json) {
      std::printf(
          "{\"threads\": %d, \"mb\": %.3f, \"encode_mbs\": %.2f, \"parallel_mbs\": %.2f, "
          "\"batch_mbs\": %.2f, \"documents\": %zu}\n",
          threads, mb, mb / serial_ms * 1e3, mb / parallel_ms * 1e3, mb / batch_ms * 1e3,
          docs.size());
      continue;
    }
    std::printf("%-16s %7d %9.1f %9.2f\n", "encode_parallel", threads, mb / parallel_ms * 1e3,
                serial_ms / parallel_ms);
    std::printf("%-16s %7d %9.1f %9.2f  (%zu ids: documents split words at their edges)\n",
                "encode_batch", threads, mb / batch_ms * 1e3, serial_ms / batch_ms, batch_ids);
  }
}

}  // namespace

void add_bench_tokenizer_command(CLI::App& bench) {
  auto args = std::make_shared<TokenizerBenchArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "tokenizer",
      "GPT-2's tokenizer: encode on one thread, then encode_parallel and encode_batch on each "
      "thread count, MB/s and the ratio to the one-thread encode of the same run.");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "GPT-2's tokenizer files: a directory, encoder.json + vocab.bpe, vocab.json + "
                  "merges.txt, or tokenizer.json")
      ->type_name("FILE|DIR")
      ->required();
  cmd->add_option("--corpus", args->corpus, "the text to encode")->type_name("FILE")->required();
  cmd->add_option("--copies", args->copies, "encode the corpus repeated this many times")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--document-bytes", args->document_bytes,
                  "encode_batch: the text cut into documents of about this size, at newlines")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "thread counts, e.g. 1,2 (default: all cores)")
      ->delimiter(',')
      ->check(positive());
  cmd->add_option("--runs", args->runs, "timed runs per row (the median is reported)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "one JSON object per thread count");
  cmd->footer(
      "Example: attn bench tokenizer --tokenizer tests/fixtures/gpt2 --corpus "
      "../shared/data/tinyshakespeare.txt --copies 9 --threads 1,2");
  cmd->callback([args] { run_bench_tokenizer(*args); });
}

}  // namespace attn::cli
