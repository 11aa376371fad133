// The attn CLI as a user runs it: exit status, stdout, and exactly one stderr line on error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "attn/hf.hpp"
#include "attn/io.hpp"
#include "attn/mha.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/simd.hpp"
#include "attn/tokenizer.hpp"
#include "attn/version.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int status = -1;  // exit status
  std::string out, err;
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

using testing::slurp;

// The number after "key": in --json output, the first one from position `from` on; -1 when
// the key is absent.
double json_number(const std::string& out, const std::string& key, size_t from = 0) {
  const size_t at = out.find("\"" + key + "\": ", from);
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + key.size() + 4));
}

class Cli : public testing::TempDirTest {
 protected:
  // Writes q, k, v to q.npy, k.npy, v.npy and returns "sdpa --q … --k … --v …" reading them.
  std::string sdpa_on(const Tensor& q, const Tensor& k, const Tensor& v) const {
    write_npy(path("q.npy"), q);
    write_npy(path("k.npy"), k);
    write_npy(path("v.npy"), v);
    return "sdpa --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy");
  }

  // env: assignments for the command's environment, e.g. "ATTN_NUM_THREADS=abc".
  CliResult run(const std::string& args, const std::string& stdin_path = "/dev/null",
                const std::string& env = "") const {
    const std::string command = env + (env.empty() ? "" : " ") + std::string(ATTN_CLI_PATH) + " " +
                                args + " >" + path("stdout") + " 2>" + path("stderr") + " <" +
                                stdin_path;
    const int raw = std::system(command.c_str());
    CliResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    r.out = slurp(path("stdout"));
    r.err = slurp(path("stderr"));
    return r;
  }

  // `train` on a tiny model over a small corpus it writes: for the tests of train's behaviour
  // (not of its learning). The caller adds --out, the iteration counts and its own flags.
  std::string tiny_train() const {
    std::ofstream(path("corpus.txt")) << std::string(3000, 'a') + "the quick brown fox\n";
    return "train --corpus " + path("corpus.txt") +
           " --n-layer 1 --n-embd 16 --n-head 2 --block-size 8 --batch-size 2 --eval-iters 1 "
           "--threads 1";
  }

  // One readable line on stderr, a non-zero status below 128, and the expected words.
  void expect_error(const std::string& args, const std::string& expected) const {
    const CliResult r = run(args);
    EXPECT_GT(r.status, 0) << args;
    EXPECT_LT(r.status, 128) << args;
    EXPECT_EQ(r.err_lines(), 1) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\nstderr: " << r.err;
  }
};

// Every command that does work; "bench" and "bpe" only group them.
const std::vector<std::string> kCommands = {"demo",
                                            "sdpa",
                                            "mha",
                                            "heatmap",
                                            "bpe train",
                                            "bpe encode",
                                            "bpe decode",
                                            "train",
                                            "generate",
                                            "explore",
                                            "export",
                                            "bench forward",
                                            "bench backward",
                                            "bench decode",
                                            "bench generate",
                                            "bench tokenizer",
                                            "bench ring"};

TEST_F(Cli, HelpOnEveryCommand) {
  std::vector<std::string> all = {"", "bench", "bpe"};
  all.insert(all.end(), kCommands.begin(), kCommands.end());
  for (const std::string& cmd : all) {
    const CliResult r = run(cmd + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
  EXPECT_NE(run("sdpa --help").out.find("--causal"), std::string::npos);
  // --weights is a file for sdpa, a dtype for generate.
  EXPECT_NE(run("sdpa --help").out.find("--weights FILE"), std::string::npos);
  for (const char* cmd : {"generate", "bench generate"}) {
    const std::string help = run(std::string(cmd) + " --help").out;
    EXPECT_EQ(help.find("--weights FILE"), std::string::npos) << help;
    EXPECT_NE(help.find("{f32,bf16}"), std::string::npos) << help;
  }
}

// Every "attn CMD --flag" that a --help text, the README or a page of docs/ mentions names a
// flag CMD has: text that points at a renamed option (heatmap's help once said `attn mha
// --weights-out`) is caught here. (A mention wrapped across lines in Markdown is not seen.)
TEST_F(Cli, HelpAndDocsMentionOnlyFlagsThatExist) {
  std::map<std::string, std::string> texts, help;
  for (const std::string& cmd : kCommands) {
    help[cmd] = run(cmd + " --help").out;
    texts["attn " + cmd + " --help"] = help[cmd];
  }
  const fs::path root = fs::path(ATTN_FIXTURES_DIR) / ".." / "..";
  texts["README.md"] = slurp(root / "README.md");
  for (const auto& page : fs::directory_iterator(root / "docs")) {
    if (page.path().extension() == ".md")
      texts[page.path().filename().string()] = slurp(page.path());
  }
  const auto has_flag = [](const std::string& text, const std::string& flag) {
    for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
      const char next = at + flag.size() < text.size() ? text[at + flag.size()] : ' ';
      if (!std::isalnum(static_cast<unsigned char>(next)) && next != '-') return true;
    }
    return false;
  };
  int mentions = 0;
  for (const auto& [source, text] : texts) {
    for (size_t at = text.find("attn "); at != std::string::npos; at = text.find("attn ", at + 1)) {
      // The longest command path after "attn ", then the flag after it, if any.
      std::string path;
      for (const std::string& candidate : kCommands) {
        if (text.compare(at + 5, candidate.size() + 1, candidate + " ") == 0 &&
            candidate.size() > path.size())
          path = candidate;
      }
      const size_t flag_at = at + 5 + path.size() + 1;
      if (path.empty() || text.compare(flag_at, 2, "--") != 0) continue;
      size_t end = flag_at + 2;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-'))
        ++end;
      const std::string flag = text.substr(flag_at, end - flag_at);
      // A build without MPI (the sanitizer presets) has `bench ring` as a stub with no flags.
      if (help[path].find("(not in this build)") != std::string::npos) continue;
      ++mentions;
      EXPECT_TRUE(has_flag(help[path], flag))
          << source << " mentions 'attn " << path << " " << flag << "'";
    }
  }
  EXPECT_GE(mentions, 50);  // the check has something to check (92 on 2026-12-03)
}

TEST_F(Cli, VersionBareHelpAndUsageAsPeopleExpect) {
  const CliResult version = run("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.out, std::string("attn ") + attn::version() + "\n");
  // Bare `attn` prints the help (status 0), and usage lines name `attn`, not the binary's path.
  const CliResult bare = run("");
  EXPECT_EQ(bare.status, 0);
  EXPECT_NE(bare.out.find("Usage: attn [OPTIONS] SUBCOMMAND"), std::string::npos) << bare.out;
  EXPECT_EQ(bare.out.find(ATTN_CLI_PATH), std::string::npos) << bare.out;
  const CliResult sdpa_help = run("sdpa --help");
  EXPECT_NE(sdpa_help.out.find("Usage: attn sdpa [OPTIONS]"), std::string::npos) << sdpa_help.out;
  EXPECT_NE(sdpa_help.out.find("--q FILE REQUIRED"), std::string::npos) << sdpa_help.out;
  EXPECT_NE(run("generate --help").out.find("--checkpoint DIR"), std::string::npos);
  // train's --out is a directory, bpe train's (a subcommand of the same name) a file.
  EXPECT_NE(run("train --help").out.find("--out DIR"), std::string::npos);
  EXPECT_NE(run("bpe train --help").out.find("--out FILE"), std::string::npos);
}

TEST_F(Cli, AnUnknownOptionIsNamedBeforeAMissingOne) {
  expect_error("sdpa --qq q.npy", "unknown option --qq (run 'attn sdpa --help')");
  expect_error("bench forward --sq 64", "unknown option --sq");
  expect_error("sdpa --q a --k b --v c --out d --frob", "unknown option --frob");
}

TEST_F(Cli, ABadThreadCountInTheEnvironmentIsAnError) {
  for (const char* value : {"abc", "0", "2x", "-1"}) {
    const CliResult r = run("demo", "/dev/null", std::string("ATTN_NUM_THREADS=") + value);
    EXPECT_EQ(r.status, 1) << value;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_NE(r.err.find(std::string("ATTN_NUM_THREADS must be a whole number from 1 to 1024, "
                                     "got '") +
                         value + "'"),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(run("--version", "/dev/null", "ATTN_NUM_THREADS=abc").status, 0);  // no work done
}

TEST_F(Cli, ATTN_SIMDCapsTheKernelsOrIsAnError) {
  const CliResult bad = run("demo", "/dev/null", "ATTN_SIMD=sse9");
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.err_lines(), 1) << bad.err;
  EXPECT_NE(bad.err.find("ATTN_SIMD: unknown SIMD cap 'sse9'"), std::string::npos) << bad.err;
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has no AVX2 to cap at";
  const std::string bench =
      "bench forward --seq 8 --heads 1 --head-dim 8 --threads 1 --runs 1 --json";
  const CliResult capped = run(bench, "/dev/null", "ATTN_SIMD=avx2");
  EXPECT_EQ(capped.status, 0) << capped.err;
  EXPECT_NE(capped.out.find("\"simd\": \"AVX2\""), std::string::npos) << capped.out;
}

TEST_F(Cli, DemoRunsAndPassesItsChecks) {
  const CliResult r = run("demo --threads 2 --html " + path("heads.html"));
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* expected :
       {"9 tokens: the(", "\u2581quick(", "decode gives the text back: yes", "(1, 9, 16)",
        "(1, 4, 9, 9)", "bitwise identical", "0.8024", "80.09", "all checks passed", "█",
        "every head, to explore in a browser: file://"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected;
  }
  EXPECT_NE(r.out.find(path("heads.html")), std::string::npos);
  EXPECT_EQ(slurp(path("heads.html")).rfind("<!DOCTYPE html>", 0), 0u);
}

TEST_F(Cli, BpeTrainEncodeDecodeRoundTripsAFile) {
  {
    std::ofstream corpus(path("corpus.txt"), std::ios::binary);
    for (int i = 0; i < 50; ++i) corpus << "the quick brown fox, number " << i << "\n\n  jumps\t";
  }
  const CliResult train = run("bpe train --corpus " + path("corpus.txt") +
                              " --vocab-size 300 "
                              "--byte-level --special '<|endoftext|>' --out " +
                              path("tok.json"));
  EXPECT_EQ(train.status, 0) << train.err;
  EXPECT_NE(train.out.find("trained 290 tokens (33 merges, 1 special)"), std::string::npos)
      << train.out;
  const CliResult stats =
      run("bpe encode --tokenizer " + path("tok.json") + " " + path("corpus.txt") + " --stats");
  EXPECT_NE(stats.out.find("bytes per token"), std::string::npos) << stats.out;
  // Random bytes through encode | decode come back byte for byte.
  {
    std::ofstream bytes(path("random.bin"), std::ios::binary);
    std::mt19937 gen(5);
    for (int i = 0; i < 2000; ++i) bytes.put(static_cast<char>(gen() % 256));
  }
  const CliResult ids =
      run("bpe encode --tokenizer " + path("tok.json") + " " + path("random.bin"));
  EXPECT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(ids.out.find_first_not_of("0123456789 \n"), std::string::npos);  // ids and spaces only
  {
    std::ofstream out(path("ids.txt"), std::ios::binary);
    out << ids.out;
  }
  const CliResult back = run("bpe decode --tokenizer " + path("tok.json") + " " + path("ids.txt"));
  EXPECT_EQ(back.status, 0) << back.err;
  EXPECT_EQ(back.out, slurp(path("random.bin")));
}

// Inputs larger than the 64 KiB reads and the encoder's blocks: the ids are the library's,
// standard input works, and decode names a bad id.
TEST_F(Cli, BpeEncodeStreamsLargeInputs) {
  std::string text;
  std::mt19937 gen(9);
  const char* words[] = {"the", "king", "  ",      "\n", "crown", "\n\n",
                         "of",  ",",    "England", "\t", "1599"};
  while (text.size() < 400000) text += std::string(words[gen() % 11]) + (gen() % 3 ? " " : "");
  {
    std::ofstream out(path("big.txt"), std::ios::binary);
    out << text;
  }
  ASSERT_EQ(run("bpe train --corpus " + path("big.txt") + " --vocab-size 300 --byte-level --out " +
                path("tok.json"))
                .status,
            0);
  const std::vector<int64_t> expected = BpeTokenizer::load(path("tok.json")).encode(text);
  std::string expected_out;
  for (size_t i = 0; i < expected.size(); ++i)
    expected_out.append(i > 0 ? " " : "").append(std::to_string(expected[i]));
  expected_out += "\n";
  for (const char* threads : {"1", "2"}) {
    const CliResult ids = run(
        std::string("bpe encode --threads ") + threads + " --tokenizer " + path("tok.json") + " -",
        path("big.txt"));
    EXPECT_EQ(ids.status, 0) << ids.err;
    EXPECT_TRUE(ids.out == expected_out) << "threads " << threads;  // not printed: 400 KB
  }
  {
    std::ofstream out(path("ids.txt"), std::ios::binary);
    out << expected_out;
  }
  const CliResult back = run("bpe decode --tokenizer " + path("tok.json"), path("ids.txt"));
  EXPECT_EQ(back.status, 0) << back.err;
  EXPECT_TRUE(back.out == text);
  {
    std::ofstream out(path("bad.txt"), std::ios::binary);
    out << "12 7\n x7 5";
  }
  expect_error("bpe decode --tokenizer " + path("tok.json") + " " + path("bad.txt"),
               "\"x7\" at byte 6 is not a token id");
  {
    std::ofstream out(path("far.txt"), std::ios::binary);
    out << "12 99999";
  }
  expect_error("bpe decode --tokenizer " + path("tok.json") + " " + path("far.txt"),
               "token id 99999 outside");
}

// A tiny model trained for a few steps: the files it writes, resuming, generating, interrupting.
TEST_F(Cli, TrainResumeAndGenerate) {
  {
    std::ofstream corpus(path("corpus.txt"), std::ios::binary);
    for (int i = 0; i < 200; ++i)
      corpus << "to be or not to be, that is the question " << i % 7 << "\n";
  }
  const std::string model =
      " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 "
      "--eval-interval 5 --eval-iters 2 --threads 1";
  const CliResult train = run("train --corpus " + path("corpus.txt") + " --out " + path("run") +
                              model + " --max-iters 10");
  ASSERT_EQ(train.status, 0) << train.err;
  EXPECT_NE(train.out.find("iter      0  train loss"), std::string::npos) << train.out;
  EXPECT_NE(train.out.find("done: 10 iterations"), std::string::npos) << train.out;
  EXPECT_NE(train.out.find("(1 layer, 2 heads, n_embd 16"), std::string::npos) << train.out;
  EXPECT_NE(train.out.find(" tokens, 1 thread\n"), std::string::npos) << train.out;
  const std::string csv = slurp(path("run/metrics.csv"));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "iter,train_loss,val_loss,lr,ms_per_iter,tokens_per_s");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 10 + 3);  // header, steps, 3 evaluations
  EXPECT_NE(csv.find("\n10,"), std::string::npos);
  EXPECT_EQ(slurp(path("run/loss.svg")).rfind("<svg", 0), 0u);
  EXPECT_TRUE(fs::exists(path("run/checkpoint.safetensors")));

  const CliResult resumed = run("train --corpus " + path("corpus.txt") + " --out " + path("run") +
                                " --resume --max-iters 15 --threads 1");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed at iteration 10"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("done: 15 iterations"), std::string::npos) << resumed.out;

  const std::string gen =
      "generate --checkpoint " + path("run") + " --max-new-tokens 40 --seed 3 --prompt 'to be'";
  const CliResult a = run(gen), b = run(gen), c = run(gen + " --no-cache");
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out.rfind("to be", 0), 0u);
  EXPECT_EQ(a.out.size(), 5u + 40u + 1u);  // prompt, one character per token, newline
  EXPECT_EQ(a.out, b.out);                 // seeded
  EXPECT_EQ(a.out, c.out);                 // the cache gives the tokens of the full window

  // Several samples (sample i from seed + i), a prompt from a file, nucleus sampling.
  const CliResult two = run(gen + " --num-samples 2");
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_EQ(two.out.substr(0, a.out.size() - 1), a.out.substr(0, a.out.size() - 1));
  EXPECT_NE(two.out.find("\n---\nto be"), std::string::npos) << two.out;
  const CliResult seed4 = run("generate --checkpoint " + path("run") +
                              " --max-new-tokens 40 --seed 4 --prompt 'to be'");
  EXPECT_EQ(two.out.substr(two.out.find("---\n") + 4), seed4.out);
  std::ofstream(path("prompt.txt")) << "to be";
  EXPECT_EQ(run("generate --checkpoint " + path("run") +
                " --max-new-tokens 40 --seed 3 --prompt-file " + path("prompt.txt"))
                .out,
            a.out);
  const CliResult nucleus = run(gen + " --top-p 0.5 --stats");
  ASSERT_EQ(nucleus.status, 0) << nucleus.err;
  EXPECT_NE(nucleus.err.find("tokens/s"), std::string::npos) << nucleus.err;
  EXPECT_EQ(a.err, "");  // not a terminal: no summary unless --stats
  expect_error(gen + " --top-p 0", "--top-p: must be in (0, 1], got 0");
  expect_error(gen + " --top-p 1.5", "--top-p: must be in (0, 1], got 1.5");
  expect_error(gen + " --prompt-file " + path("prompt.txt"), "--prompt excludes --prompt-file");

  // Mixed precision: said in the header line, kept by the checkpoint for --resume. Without
  // AVX-512 BF16 the products run in float, said in a line of its own, and the checkpoint still
  // records bf16 (the resumed run says so again).
  const CliResult bf16 = run("train --corpus " + path("corpus.txt") + " --out " + path("bf16") +
                             model + " --max-iters 4 --precision bf16");
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  const CliResult bf16_resumed = run("train --corpus " + path("corpus.txt") + " --out " +
                                     path("bf16") + " --resume --max-iters 6 --threads 1");
  ASSERT_EQ(bf16_resumed.status, 0) << bf16_resumed.err;
  const std::string fallback = "this CPU (" + simd_target() + ") has no AVX-512 BF16";
  for (const CliResult* r : {&bf16, &bf16_resumed}) {
    EXPECT_EQ(r->out.find(", bf16 products") != std::string::npos, simd_has_bf16_products())
        << r->out;
    EXPECT_EQ(r->out.find(fallback) != std::string::npos, !simd_has_bf16_products()) << r->out;
  }
  EXPECT_NE(bf16_resumed.out.find("resumed at iteration 4"), std::string::npos) << bf16_resumed.out;
  expect_error("train --corpus " + path("corpus.txt") + " --out " + path("x") + " --precision fp16",
               "--precision");

  expect_error("train --corpus " + path("missing.txt") + " --out " + path("x"),
               "missing.txt: cannot open");
  expect_error("train --corpus " + path("corpus.txt") + " --out " + path("x") + " --n-embd 15",
               "--n-embd (15) must divide by --n-head (4)");
  expect_error("train --corpus " + path("corpus.txt") + " --out " + path("x") + " --tokenizer " +
                   path("corpus.txt"),
               "tokenizer");
  expect_error("train --corpus " + path("corpus.txt") + " --out " + path("fresh") + " --resume",
               "has no checkpoint.safetensors to resume; drop --resume");
  expect_error("generate --checkpoint " + path("nothing"), "cannot open");
  expect_error("generate --checkpoint " + path("corpus.txt"), "safetensors");
}

// Ctrl-C during training saves a checkpoint that --resume continues from.
// A run's directory is protected, refusals leave nothing behind, the flags' rules name the
// flags, and --config repeats a run.
// Without AVX-512 BF16 (here: capped at AVX2), bf16 products would only cost: float, said once.
TEST_F(Cli, TrainPicksFloatWhereBf16ProductsDoNotPay) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has no AVX2 to cap at";
  const CliResult r =
      run(tiny_train() + " --out " + path("run") + " --max-iters 2 --precision bf16", "/dev/null",
          "ATTN_SIMD=avx2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--precision bf16: this CPU (AVX2) has no AVX-512 BF16, so the products "
                       "run in float"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("bf16 products"), std::string::npos) << r.out;
  // The checkpoint keeps what was asked for: resumed on the same CPU, the same choice and line.
  const CliResult resumed = run(
      "train --corpus " + path("corpus.txt") + " --out " + path("run") + " --resume --max-iters 3",
      "/dev/null", "ATTN_SIMD=avx2");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("--precision bf16: this CPU (AVX2) has no AVX-512 BF16"),
            std::string::npos)
      << resumed.out;
}

// --profile: a row per phase after the warm-up steps, the products' MFLOP as counted by hand.
TEST_F(Cli, TrainProfilePrintsEveryPhaseWithTheProductsFlops) {
  const CliResult r = run(tiny_train() + " --out " + path("run") + " --max-iters 14 --profile");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("profile of 4 steps (after the first 10), 1 thread(s)"), std::string::npos)
      << r.out;
  for (const char* phase : {"matmul", "attention", "layer_norm", "gelu", "cross_entropy",
                            "embedding", "optimizer", "the rest", "step"}) {
    EXPECT_NE(r.out.find(std::string("\n  ") + phase + " "), std::string::npos) << phase << r.out;
  }
  // 1 layer, n_embd 16, 2 windows of 8: 6 · 16 rows · (12 · 16² + 16 · vocab) FLOPs.
  const size_t at = r.out.find("vocabulary ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double vocab = std::stod(r.out.substr(at + 11));
  char expected[64];
  std::snprintf(expected, sizeof expected, "%9.1f", 6.0 * 16 * (12 * 256 + 16 * vocab) * 1e-6);
  const size_t row = r.out.find("\n  matmul ");
  ASSERT_NE(row, std::string::npos);
  const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find(expected), std::string::npos) << line << " / " << expected;
  const CliResult short_run =
      run(tiny_train() + " --out " + path("short") + " --max-iters 3 --profile");
  EXPECT_NE(short_run.out.find("profile: no step after the first 10 to time"), std::string::npos)
      << short_run.out;
}

// --resume keeps the run's cadence and options: the first command line with --resume added
// continues it; a flag that would change the model or training options is refused, never
// dropped. A run killed before its first checkpoint holds nothing to protect.
TEST_F(Cli, ResumeKeepsTheRunsCadenceAndRefusesFlagsThatWouldChangeIt) {
  const std::string base = tiny_train() + " --out " + path("run") + " --eval-interval 3";
  ASSERT_EQ(run(base + " --max-iters 4").status, 0);
  // The same command line plus --resume: every evaluation at the run's interval of 3.
  const CliResult resumed = run(tiny_train() + " --out " + path("run") + " --resume --max-iters 9");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const std::string csv = slurp(path("run/metrics.csv"));
  int evaluations = 0;
  for (size_t at = csv.find(",,\n"); at != std::string::npos; at = csv.find(",,\n", at + 1)) {
    ++evaluations;
  }
  EXPECT_EQ(evaluations, 5) << csv;  // at 0, 3, 4 (the first run's end), 6 and 9
  ASSERT_EQ(run(base + " --resume --max-iters 10").status, 0);
  expect_error(base + " --resume --max-iters 12 --n-layer 3",
               "--n-layer 3 differs from the resumed run's 1: a resumed run keeps its "
               "checkpoint's model and training options");
  expect_error(base + " --resume --lr 0.5", "--lr 0.5 differs from the resumed run's");
  expect_error(base + " --resume --force", "--force and --resume contradict each other");

  // Killed before its first checkpoint: a config.ini, metrics rows and a temporary only.
  fs::create_directories(path("early"));
  std::ofstream(path("early/config.ini")) << "n-layer = 1\n";
  std::ofstream(path("early/metrics.csv")) << "iter,train_loss,val_loss,lr,ms_per_iter\n";
  std::ofstream(path("early/checkpoint.safetensors.tmp-99999999")) << "partial";
  expect_error(tiny_train() + " --out " + path("early") + " --resume",
               "has no checkpoint.safetensors to resume; drop --resume");
  const CliResult fresh = run(tiny_train() + " --out " + path("early") + " --max-iters 2");
  ASSERT_EQ(fresh.status, 0) << fresh.err;
  EXPECT_TRUE(fs::exists(path("early/checkpoint.safetensors")));
  EXPECT_FALSE(fs::exists(path("early/checkpoint.safetensors.tmp-99999999")));
}

TEST_F(Cli, TrainProtectsRunsNamesFlagsAndRepeatsFromAConfig) {
  const std::string base = tiny_train() + " --max-iters 3 --eval-interval 2";
  ASSERT_EQ(run(base + " --out " + path("run")).status, 0);
  expect_error(base + " --out " + path("run"),
               "already holds a run; pass --resume to continue it or --force to start over");
  const CliResult forced = run(base + " --max-iters 2 --out " + path("run") + " --force");
  ASSERT_EQ(forced.status, 0) << forced.err;
  const std::string csv = slurp(path("run/metrics.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 + 2) << csv;  // replaced, not added
  // Refused runs leave no directory behind.
  for (const char* bad :
       {" --n-embd 10 --n-head 4", " --n-kv-head 3", " --positions rotary --n-embd 6 --n-head 2"}) {
    const CliResult r = run(base + bad + " --out " + path("refused"));
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_FALSE(fs::exists(path("refused"))) << bad;
  }
  expect_error(base + " --n-kv-head 3 --out " + path("refused"),
               "--n-kv-head (3) must divide --n-head (2)");
  expect_error(base + " --n-layer 0 --out " + path("refused"),
               "--n-layer: must be in [1, 1024], got 0");
  // A value that is not a number is named with the flag, as a range is.
  expect_error(base + " --warmup-iters two --out " + path("refused"),
               "--warmup-iters: 'two' is not a whole number");
  expect_error(base + " --dropout abc --out " + path("refused"),
               "--dropout: 'abc' is not a number");
  expect_error("bench forward --seq 10,abc",
               "--seq: '10,abc' is not a comma-separated list of whole numbers");
  // Ranges are said with whole numbers in full, in messages and in --help.
  expect_error(base + " --block-size 2000000 --out " + path("refused"),
               "--block-size: must be in [1, 1048576], got 2000000");
  EXPECT_NE(run("train --help").out.find("INT:[1, 1048576]"), std::string::npos);
  expect_error(base + " --eval-iters 0 --out " + path("refused"),
               "--eval-iters: must be > 0, got 0");
  expect_error(base + " --val-fraction 0.9 --out " + path("refused"), "--val-fraction");
  EXPECT_FALSE(fs::exists(path("refused")));

  // Every new run writes config.ini; --config repeats it (same checkpoint), flags override it.
  ASSERT_TRUE(fs::exists(path("run/config.ini")));
  const CliResult again =
      run("train --config " + path("run/config.ini") + " --out " + path("again"));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(slurp(path("again/checkpoint.safetensors")), slurp(path("run/checkpoint.safetensors")));
  std::ofstream(path("mine.ini")) << "# a comment\nn-layer = 2\nmax-iters = 1\n\nno-bias = true\n";
  const CliResult mine =
      run(base + " --config " + path("mine.ini") + " --out " + path("mine") + " --n-layer 3");
  ASSERT_EQ(mine.status, 0) << mine.err;
  EXPECT_NE(mine.out.find("(3 layers"), std::string::npos) << mine.out;  // the flag wins
  std::ofstream(path("bad.ini")) << "n-layr = 2\n";
  expect_error(base + " --config " + path("bad.ini") + " --out " + path("x"),
               "bad.ini:1: 'n-layr' is not an option of attn train");
  std::ofstream(path("flag.ini")) << "no-bias = maybe\n";
  expect_error(base + " --config " + path("flag.ini") + " --out " + path("x"),
               "no-bias is a flag: true or false, got 'maybe'");
}

// On a terminal (util-linux `script` gives the run one), the bar is redrawn at most ten times a
// second, and its last frame shows the whole run.
TEST_F(Cli, TrainDrawsAThrottledProgressBarOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "util-linux 'script' is not installed, so no terminal can be given to attn";
  }
  const std::string train = std::string(ATTN_CLI_PATH) + " " + tiny_train() + " --out " +
                            path("run") + " --max-iters 300 --eval-interval 1000";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(
      std::system(("script -q -e -c '" + train + "' " + path("tty.log") + " >/dev/null").c_str()),
      0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log = slurp(path("tty.log"));
  size_t frames = 0;
  for (size_t at = log.find("\033[K["); at != std::string::npos; at = log.find("\033[K[", at + 1))
    ++frames;
  EXPECT_GE(frames, 2u) << log;                                       // the first and the last
  EXPECT_LE(frames, static_cast<size_t>(seconds * 10.0) + 2) << log;  // not one per step (300)
  EXPECT_NE(log.find("] 100%  300/300"), std::string::npos) << log;
}

// A resumed run redoes the steps after its checkpoint: the rows written past it are dropped, so
// metrics.csv reads as one run.
TEST_F(Cli, ResumingDropsTheMetricsWrittenPastTheCheckpoint) {
  const std::string base = tiny_train() + " --out " + path("run") + " --eval-interval 5";
  ASSERT_EQ(run(base + " --max-iters 10").status, 0);
  fs::copy_file(path("run/checkpoint.safetensors"), path("at10.safetensors"));
  ASSERT_EQ(run(base + " --resume --max-iters 14").status, 0);
  const std::string once = slurp(path("run/metrics.csv"));
  // As if the run had died after iteration 14 with its last checkpoint at 10.
  fs::copy_file(path("at10.safetensors"), path("run/checkpoint.safetensors"),
                fs::copy_options::overwrite_existing);
  ASSERT_EQ(run(base + " --resume --max-iters 14").status, 0);
  const std::string twice = slurp(path("run/metrics.csv"));
  EXPECT_EQ(std::count(twice.begin(), twice.end(), '\n'), 1 + 14 + 4) << twice;  // evals 0 5 10 14
  EXPECT_EQ(std::count(once.begin(), once.end(), '\n'),
            std::count(twice.begin(), twice.end(), '\n'));
}

// A SIGKILL during a checkpoint write leaves NAME.tmp-PID; the next run in that directory removes
// it (and only temporaries of processes that no longer run).
TEST_F(Cli, TrainRemovesTemporariesOfAKilledRun) {
  const std::string base =
      tiny_train() + " --out " + path("run") + " --max-iters 2 --eval-interval 1";
  ASSERT_EQ(run(base).status, 0);
  long dead = 4000000;  // a pid no process has: probe downwards for one
  while (::kill(static_cast<pid_t>(dead), 0) == 0 || errno != ESRCH) --dead;
  const std::string stale = path("run/checkpoint.safetensors.tmp-" + std::to_string(dead));
  const std::string live = path("run/loss.svg.tmp-" + std::to_string(::getpid()));
  std::ofstream(stale) << "half a checkpoint";
  std::ofstream(live) << "being written";
  const CliResult r = run(base + " --resume --max-iters 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("removed 1 temporary file left by a run that was killed"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));  // this test process still runs
}

TEST_F(Cli, InterruptedTrainingSavesACheckpoint) {
  {
    std::ofstream corpus(path("corpus.txt"), std::ios::binary);
    for (int i = 0; i < 200; ++i) corpus << "all the world's a stage " << i % 5 << "\n";
  }
  const std::string command =
      std::string(ATTN_CLI_PATH) + " train --corpus " + path("corpus.txt") + " --out " +
      path("run") +
      " --n-layer 1 --n-head 2 --n-embd 16 "
      "--block-size 16 --batch-size 4 --eval-interval 1000000 --max-iters 1000000 "
      "--threads 1 >" +
      path("out") +
      " 2>&1 & pid=$!; "
      "for i in $(seq 400); do [ -s " +
      path("run/metrics.csv") +
      " ] && break; sleep 0.05; done; sleep 0.3; "
      "kill -INT $pid; wait $pid";
  const int raw = std::system(("bash -c '" + command + "'").c_str());
  EXPECT_EQ(WEXITSTATUS(raw), 130) << slurp(path("out"));
  EXPECT_NE(slurp(path("out")).find("interrupted (SIGINT) at iteration"), std::string::npos)
      << slurp(path("out"));
  const CliResult resumed = run("train --corpus " + path("corpus.txt") + " --out " + path("run") +
                                " --resume --max-iters 0");
  EXPECT_EQ(resumed.status, 0) << resumed.err;
}

// A message that quotes input bytes stays one whole line: a NUL used to cut it short.
TEST_F(Cli, ErrorsQuotingControlBytesStayWhole) {
  std::ofstream(path("c.txt")) << "abc\ndef";
  ASSERT_EQ(run("bpe train --corpus " + path("c.txt") + " --vocab-size 258 --byte-level --out " +
                path("t.json"))
                .status,
            0);
  std::ofstream(path("ids.txt"), std::ios::binary) << std::string("12 ab\0cd 3", 10);
  expect_error("bpe decode --tokenizer " + path("t.json") + " " + path("ids.txt"), "ab\\x00cd");
}

TEST_F(Cli, BpeTrainRefusesAnEmptySpecialInsteadOfHanging) {
  std::ofstream(path("corpus.txt")) << "some text\n";
  const auto start = std::chrono::steady_clock::now();
  expect_error("bpe train --corpus " + path("corpus.txt") +
                   " --vocab-size 300 --byte-level --special '' --out " + path("t.json"),
               "a special token must not be empty");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(fs::exists(path("t.json")));
}

// GPT-2's files work where attn's own tokenizer file does: encode and decode, by directory or
// by file, and the ids are GPT-2's.
TEST_F(Cli, BpeEncodesAndDecodesWithGpt2sFiles) {
  const std::string dir = std::string(ATTN_FIXTURES_DIR) + "/gpt2";
  std::ofstream(path("in.txt"), std::ios::binary) << "Hello world<|endoftext|>\n";
  const CliResult ids = run("bpe encode --tokenizer " + dir + " " + path("in.txt"));
  EXPECT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(ids.out, "15496 995 50256 198\n");
  std::ofstream(path("ids.txt")) << ids.out;
  const CliResult text = run("bpe decode --tokenizer " + dir + "/vocab.bpe " + path("ids.txt"));
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out, "Hello world<|endoftext|>\n");
  const CliResult shown =
      run("bpe encode --tokenizer " + dir + "/encoder.json --tokens " + path("in.txt"));
  EXPECT_EQ(shown.out, "Hello \xc4\xa0world <|endoftext|> \xc4\x8a\n");  // Ġworld, Ċ
  expect_error("bpe encode --tokenizer " + path("") + " " + path("in.txt"),
               "not GPT-2's tokenizer files");
}

// generate --model: a GPT-2 directory in Hugging Face's layout (written here from a random attn
// model under GPT-2's tensor names, with GPT-2's tokenizer files beside it) gives, greedily,
// the text the library gives.
TEST_F(Cli, GenerateRunsAGpt2ModelDirectory) {
  GptConfig config;
  config.vocab_size = 50257;
  config.block_size = 16;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 8;
  const Gpt model(config, 5);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const GptParameter& p : model.parameter_table())
    tensors.emplace_back("transformer." + p.hf_name, model.parameter(p.name));
  const fs::path dir = path("gpt2");
  fs::create_directories(dir);
  write_safetensors((dir / "model.safetensors").string(), tensors);
  std::ofstream(dir / "config.json") << R"({"n_layer": 1, "n_head": 2, "n_embd": 8,
      "n_positions": 16, "vocab_size": 50257})";
  for (const char* f : {"encoder.json", "vocab.bpe"})
    fs::copy_file(fs::path(ATTN_FIXTURES_DIR) / "gpt2" / f, dir / f);

  const HfGpt2 loaded = load_hf_gpt2(dir.string());
  GenerateOptions options;
  options.max_new_tokens = 6;
  options.sampling.temperature = 0;
  const std::vector<int64_t> ids =
      generate(loaded.model, loaded.tokenizer.encode("Hello world"), options);
  const CliResult r = run("generate --model " + dir.string() +
                          " --prompt 'Hello world' --max-new-tokens 6 --temperature 0");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "Hello world" + loaded.tokenizer.decode(ids) + "\n");
  // --weights bf16: the library's text with the matrices in bf16.
  HfGpt2 half = load_hf_gpt2(dir.string());
  half.model.set_weights_dtype(Dtype::kBFloat16);
  const std::vector<int64_t> half_ids =
      generate(half.model, half.tokenizer.encode("Hello world"), options);
  const CliResult h =
      run("generate --model " + dir.string() +
          " --prompt 'Hello world' --max-new-tokens 6 --temperature 0 --weights bf16");
  EXPECT_EQ(h.status, 0) << h.err;
  EXPECT_EQ(h.out, "Hello world" + half.tokenizer.decode(half_ids) + "\n");
  expect_error("generate --model " + dir.string() + " --weights f16", "--weights: f16 not in");
  // bench generate counts the bytes a token reads as the model holds them: bf16 matrices, wpe
  // one row of floats, f32 K/V of 4 + 2.5 cached positions on average.
  const CliResult bench = run("bench generate --model " + dir.string() +
                              " --prompt-tokens 4 --new-tokens 4 --threads 1 --runs 1 --json "
                              "--weights bf16");
  ASSERT_EQ(bench.status, 0) << bench.err;
  const auto field = [&](const std::string& key) { return json_number(bench.out, key); };
  const double expected_bytes = static_cast<double>(half.model.weight_bytes()) - 4.0 * 16 * 8 +
                                4.0 * 8 + 2.0 * 4.0 * 1 * 8 * 6.5;
  EXPECT_NE(bench.out.find("\"weights\": \"bf16\""), std::string::npos) << bench.out;
  EXPECT_EQ(field("bytes_per_token"), expected_bytes) << bench.out;
  EXPECT_GT(field("fraction_of_limit"), 0.0) << bench.out;
  EXPECT_GT(field("bandwidth_gbps"), 0.0) << bench.out;
  // The prompt's FLOPs as decode runs it in this one-layer model: QKV on all 4 rows (8 × 24),
  // Wo and the MLP on the last row only (8 × 8 + 8 × 32 + 32 × 8), that row's query over 4 keys
  // (QKᵀ and A·V: 2 · 2 · 8 · 4), and the head on one row (8 × 50257); 2 FLOPs a multiply-add.
  EXPECT_EQ(field("prompt_flop"),
            2.0 * (4 * 8 * 24 + 8 * 8 + 8 * 32 + 32 * 8) + 2.0 * 2 * 8 * 4 + 2.0 * 8 * 50257)
      << bench.out;
  EXPECT_GT(field("prompt_fraction_of_peak"), 0.0) << bench.out;
  // With a q8 cache K/V count as stored: 2 heads of (4 int8 + a 2-byte scale) a position.
  const CliResult q8 = run("bench generate --model " + dir.string() +
                           " --prompt-tokens 4 --new-tokens 4 --threads 1 --runs 1 --json "
                           "--weights bf16 --cache-dtype q8");
  ASSERT_EQ(q8.status, 0) << q8.err;
  EXPECT_NE(q8.out.find("\"cache_dtype\": \"q8\""), std::string::npos) << q8.out;
  const size_t at = q8.out.find("\"bytes_per_token\": ");
  ASSERT_NE(at, std::string::npos) << q8.out;
  EXPECT_EQ(std::stod(q8.out.substr(at + 19)),
            expected_bytes - 2.0 * 4.0 * 1 * 8 * 6.5 + 2.0 * (4 + 2) * 2 * 6.5)
      << q8.out;
  // --profile: the prompt's time per phase, its products and attention apart in the FLOPs.
  const std::string profiled = "bench generate --model " + dir.string() +
                               " --prompt-tokens 4 --new-tokens 1 --threads 1 --runs 2 --profile";
  const CliResult json_profile = run(profiled + " --json");
  ASSERT_EQ(json_profile.status, 0) << json_profile.err;
  const std::string& out = json_profile.out;
  const size_t profile_at = out.find("{\"profile\": \"prompt\", \"threads\": 1");
  ASSERT_NE(profile_at, std::string::npos) << out;
  const auto profile_field = [&](const std::string& key) {
    return json_number(out, key, profile_at);
  };
  EXPECT_EQ(profile_field("matmul_flop"),
            2.0 * (4 * 8 * 24 + 8 * 8 + 8 * 32 + 32 * 8) + 2.0 * 8 * 50257);
  EXPECT_EQ(profile_field("attention_flop"), 2.0 * 2 * 8 * 4);
  EXPECT_GT(profile_field("matmul_ms"), 0.0) << out;
  EXPECT_GT(profile_field("attention_ms"), 0.0) << out;
  EXPECT_LE(profile_field("matmul_ms") + profile_field("attention_ms"), profile_field("prompt_ms"))
      << out;
  const CliResult table = run(profiled);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("the prompt on 1 thread(s), mean of 2 runs:"), std::string::npos)
      << table.out;
  for (const char* phase : {"matmul", "attention", "layer_norm", "the rest", "prompt"}) {
    EXPECT_NE(table.out.find(std::string("\n  ") + phase + " "), std::string::npos)
        << phase << table.out;
  }
  expect_error("generate --model " + dir.string() + " --checkpoint x",
               "--checkpoint excludes --model");
  expect_error("generate --max-new-tokens 3", "give one of --checkpoint");
  // The explorer reads the same directory: GPT-2's tokens, as its vocabulary spells them.
  const CliResult page = run("explore --model " + dir.string() + " --text 'Hello world' --out " +
                             path("g.html") + " --svg " + path("g.svg"));
  ASSERT_EQ(page.status, 0) << page.err;
  EXPECT_NE(page.err.find("((1, 2, 2, 2) weights, 2 tokens)"), std::string::npos) << page.err;
  EXPECT_NE(slurp(path("g.svg")).find(">Ġworld</text>"), std::string::npos);
}

// attn export --hf writes what attn generate --model reads: the same text as the checkpoint
// gives, token for token (same tokenizer ids, same weights, same seed).
TEST_F(Cli, ExportedModelsGenerateWhatTheirCheckpointDoes) {
  {
    std::ofstream corpus(path("corpus.txt"), std::ios::binary);
    for (int i = 0; i < 100; ++i) corpus << "naïve words, " << i << "  of  a café\n";
  }
  const std::string train = "train --corpus " + path("corpus.txt") +
                            " --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 "
                            "--eval-interval 5 --eval-iters 1 --threads 1 --max-iters 5 --out ";
  ASSERT_EQ(run(train + path("bpe") + " --tokenizer bpe --vocab-size 300").status, 0);
  const CliResult exported = run("export --hf " + path("hf") + " --checkpoint " + path("bpe"));
  ASSERT_EQ(exported.status, 0) << exported.err;
  for (const char* f :
       {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(path("hf") + "/" + f)) << f;
  EXPECT_NE(exported.err.find(": config.json, model.safetensors, tokenizer.json, "
                              "tokenizer_config.json ("),
            std::string::npos)
      << exported.err;
  const std::string gen = " --prompt 'naïve  words' --max-new-tokens 12 --seed 5";
  const CliResult from_checkpoint = run("generate --checkpoint " + path("bpe") + gen);
  const CliResult from_hf = run("generate --model " + path("hf") + gen);
  ASSERT_EQ(from_hf.status, 0) << from_hf.err;
  EXPECT_EQ(from_hf.out, from_checkpoint.out);

  ASSERT_EQ(run(train + path("chars")).status, 0);
  expect_error("export --hf " + path("hf2") + " --checkpoint " + path("chars"),
               "the tokenizer is character-level");
  EXPECT_FALSE(fs::exists(path("hf2/config.json")));
  ASSERT_EQ(run("export --hf " + path("hf2") + " --checkpoint " + path("chars") + " --no-tokenizer")
                .status,
            0);
  EXPECT_TRUE(fs::exists(path("hf2/model.safetensors")));
  EXPECT_FALSE(fs::exists(path("hf2/tokenizer.json")));
  ASSERT_EQ(run(train + path("rope") + " --positions rotary").status, 0);
  expect_error("export --hf " + path("hf3") + " --checkpoint " + path("rope") + " --no-tokenizer",
               "GPT-2 has learned positions; this model has rotary ones");
  expect_error("export --hf " + path("hf3") + " --random gpt3", "unknown GPT-2 shape \"gpt3\"");
  expect_error("export --hf " + path("hf3"), "give one of --checkpoint");
  expect_error("export --hf " + path("hf3") + " --checkpoint " + path("bpe") + " --tokenizer x",
               "--tokenizer goes with --random");
  expect_error("export --hf " + path("corpus.txt") + " --checkpoint " + path("bpe"),
               "--hf must be a directory");
}

TEST_F(Cli, BpeErrorsAreOneLine) {
  const CliResult missing = run("bpe encode --tokenizer " + path("none.json") + " -");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("none.json: cannot open"), std::string::npos) << missing.err;
  fs::create_directories(path("folder"));
  attn::BpeOptions options;
  options.vocab_size = 260;
  options.byte_level = true;
  attn::BpeTokenizer::train("a b", options).save(path("tok.json"));
  for (const char* command : {"encode", "decode"}) {
    expect_error(
        std::string("bpe ") + command + " --tokenizer " + path("tok.json") + " " + path("folder"),
        "folder: is a directory");
    expect_error(
        std::string("bpe ") + command + " --tokenizer " + path("tok.json") + " " + path("absent"),
        "absent: cannot open");
  }
  // A directory is taken for GPT-2's files (tests/cli_test.cpp BpeEncodesAndDecodesWithGpt2sFiles).
  expect_error("bpe encode --tokenizer " + path("folder") + " -",
               "folder: not GPT-2's tokenizer files");
  {
    std::ofstream broken(path("broken.json"));
    broken << "{\"format\": \"attn-bpe\", \"version\": 2}";
  }
  const CliResult version = run("bpe decode --tokenizer " + path("broken.json") + " -");
  EXPECT_EQ(version.status, 1);
  EXPECT_NE(version.err.find("unsupported version 2"), std::string::npos) << version.err;
  EXPECT_EQ(std::count(version.err.begin(), version.err.end(), '\n'), 1) << version.err;
  const CliResult no_vocab =
      run("bpe train --corpus " + path("none.txt") + " --out " + path("t.json"));
  EXPECT_EQ(no_vocab.status, 2);  // a required option is missing
}

TEST_F(Cli, SdpaWritesWhatTheLibraryComputes) {
  const Tensor q = rand_normal({2, 5, 8}, 1), k = rand_normal({2, 7, 8}, 2),
               v = rand_normal({2, 7, 3}, 3);
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  write_npy_bool(path("m.npy"), causal_mask(5, 7));
  const CliResult r =
      run("sdpa --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
          " --causal --scale 0.5 --out " + path("o.npy") + " --weights " + path("w.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  SdpaOptions o;
  o.causal = true;
  o.scale = 0.5f;
  o.return_weights = true;
  const SdpaResult expected = sdpa(q, k, v, o);  // the fused path is the default
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("o.npy")).values, expected.output));
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("w.npy")).values, expected.weights));
  // --impl reference runs the readable path.
  ASSERT_EQ(run("sdpa --impl reference --q " + path("q.npy") + " --k " + path("k.npy") + " --v " +
                path("v.npy") + " --causal --scale 0.5 --out " + path("r.npy"))
                .status,
            0);
  EXPECT_TRUE(
      testing::BitwiseEqual(read_npy(path("r.npy")).values, reference::sdpa(q, k, v, o).output));
  // The same result through an explicit boolean mask file.
  ASSERT_EQ(run("sdpa --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                " --mask " + path("m.npy") + " --scale 0.5 --out " + path("o2.npy"))
                .status,
            0);
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("o2.npy")).values, expected.output));
}

// The score variants reach the library as given; a count that is not one per head is the
// library's error, one line.
TEST_F(Cli, SdpaTakesTheVariants) {
  const Tensor q = rand_normal({2, 5, 8}, 1), k = rand_normal({2, 7, 8}, 2),
               v = rand_normal({2, 7, 3}, 3);
  const std::string qkv = sdpa_on(q, k, v);
  const CliResult r = run(qkv + " --causal --softcap 1.5 --alibi-slopes 0.5,0.25 --sinks " +
                          "0.3,-1 --out " + path("o.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  SdpaOptions o;
  o.causal = true;
  o.softcap = 1.5f;
  o.alibi_slopes = {0.5f, 0.25f};
  o.sinks = {0.3f, -1.0f};
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("o.npy")).values, sdpa(q, k, v, o).output));
  expect_error(qkv + " --sinks 1 --out " + path("x.npy"), "1 sinks for 2 query heads");
}

// "-" writes to standard output wherever it reads from standard input.
TEST_F(Cli, OutDashWritesToStandardOutput) {
  const Tensor q = rand_normal({2, 5, 8}, 1);
  write_npy(path("q.npy"), q);
  const std::string qkv =
      "sdpa --q " + path("q.npy") + " --k " + path("q.npy") + " --v " + path("q.npy");
  const CliResult r = run(qkv + " --out -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(parse_npy(r.out, "stdout").values.to_vector(), sdpa(q, q, q).output.to_vector());
  EXPECT_NE(r.err.find("-> standard output"), std::string::npos) << r.err;
  const CliResult w = run(qkv + " --out " + path("o.npy") + " --weights -");
  ASSERT_EQ(w.status, 0) << w.err;
  EXPECT_EQ(parse_npy(w.out, "stdout").values.shape(), (Shape{2, 5, 5}));
  expect_error(qkv + " --out - --weights -", "only one output can be '-'");
  // All outputs or none: an unwritable weights path leaves no output file either.
  expect_error(qkv + " --out " + path("both.npy") + " --weights " + path("no/such/dir/w.npy"),
               "cannot open for writing");
  EXPECT_FALSE(fs::exists(path("both.npy")));
  for (const auto& entry : fs::directory_iterator(fs::path(path("both.npy")).parent_path())) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  std::ofstream(path("corpus.txt")) << "abc abc abd\n";
  const CliResult tok =
      run("bpe train --corpus " + path("corpus.txt") + " --vocab-size 260 --byte-level --out -");
  ASSERT_EQ(tok.status, 0) << tok.err;
  EXPECT_EQ(tok.out.rfind("{", 0), 0u) << tok.out;
  EXPECT_NO_THROW(BpeTokenizer::from_json(tok.out));
  EXPECT_NE(run("sdpa --help").out.find("'-': standard output"), std::string::npos);
}

TEST_F(Cli, SdpaTakesTheCausalAlignment) {
  const Tensor q = rand_normal({2, 5, 8}, 1), k = rand_normal({2, 7, 8}, 2),
               v = rand_normal({2, 7, 3}, 3);
  const std::string qkv = sdpa_on(q, k, v) + " --causal";
  ASSERT_EQ(run(qkv + " --causal-align top-left --out " + path("top.npy")).status, 0);
  ASSERT_EQ(run(qkv + " --out " + path("bottom.npy")).status, 0);
  SdpaOptions o;
  o.causal = true;
  o.causal_align = CausalAlign::kTopLeft;
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("top.npy")).values, sdpa(q, k, v, o).output));
  o.causal_align = CausalAlign::kBottomRight;
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("bottom.npy")).values, sdpa(q, k, v, o).output));
  const CliResult bad = run(qkv + " --causal-align left --out " + path("x.npy"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--causal-align"), std::string::npos) << bad.err;
  EXPECT_NE(run("sdpa --help").out.find("bottom-right"), std::string::npos);
}

// A version-1.0 .npy of raw little-endian elements with the given descr, as numpy writes them.
void write_raw_npy(const std::string& path, const std::string& descr, const std::string& shape,
                   const std::string& payload) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  std::ofstream(path, std::ios::binary) << bytes << header << payload;
}

template <class T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

TEST_F(Cli, IntegerMasksAndNarrowedDoubles) {
  const Tensor q = rand_normal({5, 8}, 1), k = rand_normal({7, 8}, 2), v = rand_normal({7, 3}, 3);
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  const Tensor allowed = causal_mask(5, 7);
  std::vector<int64_t> as_i8;
  std::vector<uint8_t> as_u1;
  for (float a : allowed.to_vector()) {
    as_i8.push_back(a != 0.0f ? -3 : 0);  // any non-zero value allows
    as_u1.push_back(a != 0.0f ? 1 : 0);
  }
  write_raw_npy(path("m_i8.npy"), "<i8", "(5, 7)", raw(as_i8));
  write_raw_npy(path("m_u1.npy"), "|u1", "(5, 7)", raw(as_u1));
  SdpaOptions o;
  o.mask = Mask::allow(allowed);
  const Tensor expected = sdpa(q, k, v, o).output;
  const std::string qkv =
      "sdpa --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy");
  for (const char* mask : {"m_i8.npy", "m_u1.npy"}) {
    const CliResult r = run(qkv + " --mask " + path(mask) + " --out " + path("o.npy"));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "") << mask;
    EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("o.npy")).values, expected)) << mask;
  }
  // float64 input: computed in float32, said once on stderr for that file.
  std::vector<double> q64;
  for (float x : q.to_vector()) q64.push_back(x);
  write_raw_npy(path("q64.npy"), "<f8", "(5, 8)", raw(q64));
  const CliResult r = run("sdpa --q " + path("q64.npy") + " --k " + path("k.npy") + " --v " +
                          path("v.npy") + " --out " + path("o64.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "attn: note: " + path("q64.npy") + ": float64 values narrowed to float32\n");
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("o64.npy")).values, sdpa(q, k, v).output));
  // Integers are masks, not data.
  expect_error("sdpa --q " + path("m_i8.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                   " --out " + path("x.npy"),
               "expected float data, got integers");
}

// `attn mha` takes what the library takes: GQA with narrower WK/WV, biases, RoPE, a mask.
// The layer of tests/fixtures/mha_backward_gqa_rope (PyTorch) cut into its separate matrices.
TEST_F(Cli, MhaTakesGroupedHeadsBiasesRopeAndAMask) {
  auto fixture = [](const char* array) {
    return read_npy(std::string(ATTN_FIXTURES_DIR) + "/mha_backward_gqa_rope/" + array + ".npy")
        .values;
  };
  const Tensor wqkv = fixture("wqkv"), bqkv = fixture("bqkv");
  const int64_t d = 32, kv = 16, width = d + 2 * kv;
  write_npy(path("x.npy"), fixture("x"));
  write_npy(path("wq.npy"), wqkv.as_strided({d, d}, {width, 1}, 0).contiguous());
  write_npy(path("wk.npy"), wqkv.as_strided({d, kv}, {width, 1}, d).contiguous());
  write_npy(path("wv.npy"), wqkv.as_strided({d, kv}, {width, 1}, d + kv).contiguous());
  write_npy(path("wo.npy"), fixture("wo"));
  write_npy(path("bq.npy"), bqkv.slice(0, d).contiguous());
  write_npy(path("bk.npy"), bqkv.as_strided({kv}, {1}, d).contiguous());
  write_npy(path("bv.npy"), bqkv.as_strided({kv}, {1}, d + kv).contiguous());
  write_npy(path("bo.npy"), fixture("bo"));
  write_npy_bool(path("causal.npy"), causal_mask(70));
  const std::string layer = "mha --x " + path("x.npy") + " --wq " + path("wq.npy") + " --wk " +
                            path("wk.npy") + " --wv " + path("wv.npy") + " --wo " + path("wo.npy") +
                            " --heads 4 --bq " + path("bq.npy") + " --bk " + path("bk.npy") +
                            " --bv " + path("bv.npy") + " --bo " + path("bo.npy") + " --rope";
  for (const std::string& causal : {std::string(" --causal"), " --mask " + path("causal.npy")}) {
    for (const char* impl : {"fused", "reference"}) {
      const CliResult r =
          run(layer + " --kv-heads 2" + causal + " --impl " + impl + " --out " + path("y.npy"));
      ASSERT_EQ(r.status, 0) << r.err;
      EXPECT_TRUE(testing::RelativelyClose(read_npy(path("y.npy")).values, fixture("y"), 1e-4,
                                           impl + causal));
    }
  }
  expect_error(layer + " --kv-heads 4 --out " + path("y.npy"),
               "wk must be (d_model, n_kv_heads·d_head) = (32, 32), got (32, 16)");
  EXPECT_NE(run("mha --help").out.find("--kv-heads"), std::string::npos);
}

TEST_F(Cli, MhaAndHeatmap) {
  const Tensor x = rand_normal({1, 4, 8}, 4);
  const Tensor w = rand_normal({8, 8}, 5, 0, 0.3f);
  write_npy(path("x.npy"), x);
  write_npy(path("w.npy"), w);
  const std::string wq =
      " --wq " + path("w.npy") + " --wk " + path("w.npy") + " --wv " + path("w.npy");
  const CliResult r =
      run("mha --x " + path("x.npy") + wq + " --wo " + path("w.npy") +
          " --heads 2 --causal --threads 1 --out " + path("y.npy") + " --weights " + path("a.npy"));
  ASSERT_EQ(r.status, 0) << r.err;
  SdpaOptions o;
  o.causal = true;
  const MhaResult expected = multi_head_attention(x, w, w, w, w, 2, o);
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("y.npy")).values, expected.output));

  const CliResult map =
      run("heatmap --weights " + path("a.npy") + " --head 1 --tokens \"a b c d\"");
  ASSERT_EQ(map.status, 0) << map.err;
  EXPECT_NE(map.out.find("d "), std::string::npos);
  EXPECT_NE(map.out.find("scale:"), std::string::npos);
  expect_error("heatmap --weights " + path("a.npy") + " --head 2",
               "--head 2 out of range: the weights (1, 2, 4, 4) have 2 heads");
  expect_error("heatmap --weights " + path("a.npy") + " --tokens \"a b\"",
               "--tokens has 2 words but the weights have 4 keys");
}

TEST_F(Cli, HeatmapSelectorsScalesWidthAndTokenLabels) {
  // Weights of the same shapes the library returns: (H, T, T) and (T, T).
  SdpaOptions causal;
  causal.causal = true;
  causal.return_weights = true;
  const Tensor q = rand_normal({2, 6, 8}, 1);
  const Tensor w3 = sdpa(q, q, q, causal).weights;  // (2, 6, 6)
  write_npy(path("w3.npy"), w3);
  write_npy(path("w2.npy"), w3.select(0).contiguous());
  expect_error("heatmap --weights " + path("w3.npy") + " --batch 1",
               "--batch 1 out of range: the weights (2, 6, 6) have no batch dim");
  expect_error("heatmap --weights " + path("w2.npy") + " --head 2",
               "--head 2 out of range: the weights (6, 6) have no head dim");
  EXPECT_EQ(run("heatmap --weights " + path("w2.npy") + " --head 0").status, 0);
  // The file as the first argument: the same map.
  const CliResult positional = run("heatmap " + path("w3.npy") + " --head 1");
  ASSERT_EQ(positional.status, 0) << positional.err;
  EXPECT_EQ(positional.out, run("heatmap --weights " + path("w3.npy") + " --head 1").out);
  expect_error("heatmap " + path("w2.npy") + " " + path("w2.npy"), "not expected");
  // --scale row: every row has a full block.
  const CliResult row = run("heatmap --weights " + path("w2.npy") + " --scale row");
  ASSERT_EQ(row.status, 0) << row.err;
  EXPECT_NE(row.out.find("per row"), std::string::npos) << row.out;
  EXPECT_EQ(row.err, "");  // these are weights: no warning
  expect_error("heatmap --weights " + path("w2.npy") + " --scale log", "--scale");
  // Not weights: one warning line, the map still drawn.
  write_npy(path("not.npy"), Tensor::full({3, 3}, 2.0f));
  const CliResult odd = run("heatmap --weights " + path("not.npy"));
  EXPECT_EQ(odd.status, 0);
  EXPECT_NE(odd.err.find("row 0 sums to 6, not 1: these may not be attention weights"),
            std::string::npos)
      << odd.err;
  // Long sequences: down-sampled to --width with a note; --width 0 never.
  const Tensor q_long = rand_normal({100, 8}, 2);
  write_npy(path("long.npy"), sdpa(q_long, q_long, q_long, causal).weights);
  const CliResult narrow = run("heatmap --weights " + path("long.npy") + " --width 40");
  ASSERT_EQ(narrow.status, 0) << narrow.err;
  EXPECT_NE(narrow.out.find("down-sampled 6×"), std::string::npos) << narrow.out;
  const CliResult full = run("heatmap --weights " + path("long.npy") + " --width 0");
  EXPECT_EQ(full.out.find("down-sampled"), std::string::npos);
  // Labels straight from the tokenizer: `bpe encode --tokens` prints displayed tokens.
  std::ofstream(path("corpus.txt")) << "the cat sat on the mat. the cat sat.\n";
  ASSERT_EQ(run("bpe train --corpus " + path("corpus.txt") +
                " --vocab-size 270 --byte-level --out " + path("tok.json"))
                .status,
            0);
  std::ofstream(path("six.txt")) << "the cat sat";
  const CliResult shown =
      run("bpe encode --tokenizer " + path("tok.json") + " --tokens " + path("six.txt"));
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("Ġ"), std::string::npos) << shown.out;  // a space, displayed
  const std::string labels = shown.out.substr(0, shown.out.size() - 1);
  const int64_t count = 1 + std::count(labels.begin(), labels.end(), ' ');
  const Tensor qt = rand_normal({count, 8}, 3);
  write_npy(path("wt.npy"), sdpa(qt, qt, qt, causal).weights);
  const CliResult labelled =
      run("heatmap --weights " + path("wt.npy") + " --tokens '" + labels + "'");
  ASSERT_EQ(labelled.status, 0) << labelled.err;
  EXPECT_NE(labelled.out.find("Ġ"), std::string::npos) << labelled.out;
}

// PNG's IHDR: width and height, big-endian, at bytes 16 and 20 after the signature.
std::pair<uint32_t, uint32_t> png_size(const std::string& png) {
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  return png.size() > 24 ? std::pair{be32(16), be32(20)} : std::pair{0u, 0u};
}

TEST_F(Cli, HeatmapDrawsPicturesOfOneHeadOrTheWholeGrid) {
  SdpaOptions causal;
  causal.causal = true;
  causal.return_weights = true;
  const Tensor q = rand_normal({2, 3, 5, 8}, 4);
  write_npy(path("grid.npy"), sdpa(q, q, q, causal).weights);  // (2, 3, 5, 5): a layer per row
  const CliResult one =
      run("heatmap --weights " + path("grid.npy") + " --layer 1 --head 2 --png " + path("one.png") +
          " --svg " + path("one.svg") + " --tokens 'a b c d e' --title 'layer 1 head 2'");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(one.out, "");
  const std::string png = slurp(path("one.png")), svg = slurp(path("one.svg"));
  EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
  const auto [w, h] = png_size(png);
  EXPECT_NE(svg.find("width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) + "\""),
            std::string::npos)
      << "the SVG and the PNG have one layout";
  EXPECT_NE(svg.find(">layer 1 head 2</text>"), std::string::npos);
  EXPECT_NE(svg.find(">e</text>"), std::string::npos);
  EXPECT_EQ(svg.find("head 0</text>"), std::string::npos);  // one panel, no panel titles
  const CliResult grid =
      run("heatmap --weights " + path("grid.npy") + " --grid --svg " + path("grid.svg"));
  ASSERT_EQ(grid.status, 0) << grid.err;
  const std::string all = slurp(path("grid.svg"));
  for (const char* panel : {">layer 0 · head 0</text>", ">layer 1 · head 2</text>"}) {
    EXPECT_NE(all.find(panel), std::string::npos) << panel;
  }
  expect_error("heatmap --weights " + path("grid.npy") + " --grid", "--grid draws a picture");
  write_npy(path("flat.npy"), Tensor::full({2, 2}, 0.5f));
  expect_error("heatmap --weights " + path("flat.npy") + " --grid --png " + path("x.png"),
               "--grid needs (H, Tq, Tk)");
  expect_error("heatmap --weights " + path("grid.npy") + " --png " + path("no/such/dir.png"),
               "no/such/dir.png");
  expect_error(
      "heatmap --weights " + path("grid.npy") + " --png " + path("y.png") + " --max-cells 0",
      "--max-cells");
  EXPECT_FALSE(fs::exists(path("y.png")));
}

TEST_F(Cli, ExploreWritesOnePageOrExplainsWhyNot) {
  ASSERT_EQ(run(tiny_train() + " --out " + path("run") + " --max-iters 2 --eval-interval 2").status,
            0);
  const CliResult ok = run("explore --checkpoint " + path("run") + " --text 'the fox' --out " +
                           path("a.html") + " --save-weights " + path("w.npy"));
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.err.find("((1, 2, 7, 7) weights, 7 tokens), " + path("w.npy") + "; open file://"),
            std::string::npos)
      << ok.err;
  const std::string page = slurp(path("a.html"));
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("reading 7 tokens: the fox"), std::string::npos);
  EXPECT_EQ(read_npy(path("w.npy")).values.shape(), (Shape{1, 2, 7, 7}));
  // The saved weights are what the explorer shows, and they draw as a grid.
  EXPECT_EQ(run("heatmap --weights " + path("w.npy") + " --grid --png " + path("g.png")).status, 0);
  // Or straight from explore, labelled with the tokens.
  ASSERT_EQ(run("explore --checkpoint " + path("run") + " --text 'the fox' --out " +
                path("b.html") + " --svg " + path("b.svg"))
                .status,
            0);
  const std::string svg = slurp(path("b.svg"));
  EXPECT_NE(svg.find(">layer 0 · head 1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">f</text>"), std::string::npos);
  expect_error("explore --text hi", "give one of --checkpoint");
  expect_error("explore --checkpoint " + path("run") + " --weights " + path("w.npy"),
               "give one of --checkpoint");
  expect_error("explore --checkpoint " + path("run") + " --text ''", "--text is empty");
  expect_error("explore --checkpoint " + path("run") + " --text 'the fox the fox the fox'",
               "the text is 23 tokens; this model reads at most 8 (block_size)");
  expect_error("explore --weights " + path("w.npy") + " --tokens 'a b'",
               "--tokens gives 2 labels for the 7 keys of the weights (1, 2, 7, 7)");
  expect_error("explore --weights " + path("w.npy") + " --text hi", "--text goes with a model");
  expect_error("explore --checkpoint " + path("run") + " --text the --out " + path("no/dir.html"),
               "no/dir.html");
}

TEST_F(Cli, BenchTokenizerReportsEachWayOnEachThreadCount) {
  std::ofstream(path("text.txt")) << "Hello world, it's 2026.\nThe quick brown fox.\n";
  const CliResult r =
      run("bench tokenizer --tokenizer " + std::string(ATTN_FIXTURES_DIR) + "/gpt2 --corpus " +
          path("text.txt") + " --copies 50 --document-bytes 64 --threads 1,2 --runs 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
  EXPECT_NE(r.out.find("{\"threads\": 2, \"mb\": 0.002"), std::string::npos) << r.out;
  expect_error("bench tokenizer --tokenizer " + std::string(ATTN_FIXTURES_DIR) + "/gpt2 --corpus " +
                   path("text.txt") + " --copies 0",
               "--copies");
}

// --packed times sdpa_varlen and its backward, counting each sequence's own causal square: the
// useful share of the FLOPs is that of lengths 16 and 32 (48 split 1 : 2), not of one 48.
TEST_F(Cli, BenchPackedCountsEachSequencesOwnSquare) {
  const double own = (16.0 * 17 + 32.0 * 33) / 2 / (16.0 * 16 + 32.0 * 32);  // 0.519
  const double whole = 49.0 / 2 / 48;                                        // 0.510
  for (const char* pass : {"forward", "backward"}) {
    const CliResult r = run(std::string("bench ") + pass +
                            " --seq 48 --heads 8 --head-dim 32 --causal --threads 1 --runs 1 "
                            "--packed 2 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto field = [&](const std::string& key) { return json_number(r.out, key); };
    const double share = field("useful_gflops") / field("gflops");  // six digits each
    EXPECT_NEAR(share, own, 1e-4) << pass << ": " << r.out;
    EXPECT_GT(std::abs(share - whole), 8e-3) << pass;
    EXPECT_EQ(field("packed"), 2.0) << r.out;
  }
  expect_error("bench backward --seq 48 --packed 2 --impl reference", "fused path only");
}

// bench decode times every storage with the read-bandwidth probe taking turns: a JSON line per
// storage, each set against the same probe of the run, and the probe's own "read" row in the
// table.
TEST_F(Cli, BenchDecodeSetsEachStorageAgainstTheProbeOfItsRun) {
  const std::string decode = "bench decode --cache 64 --heads 2 --head-dim 16 --threads 1 --runs 1";
  const CliResult json = run(decode + " --cache-dtype f32,q8 --json");
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 2) << json.out;
  const size_t q8 = json.out.find("\"cache_dtype\": \"q8\"");
  ASSERT_NE(q8, std::string::npos) << json.out;
  const double probe = json_number(json.out, "bandwidth_gbps");
  EXPECT_GT(probe, 0.0) << json.out;
  EXPECT_EQ(json_number(json.out, "bandwidth_gbps", q8), probe) << json.out;
  EXPECT_GT(json_number(json.out, "gbps", q8), 0.0) << json.out;
  const CliResult table = run(decode);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("64   read       1"), std::string::npos) << table.out;
}

// The bench names what bf16 products ran on (AMX tiles, vdpbf16ps or the float kernels), in its
// header and in its JSON, beside the precision.
TEST_F(Cli, BenchNamesTheBf16Engine) {
  const CliResult table =
      run("bench forward --seq 32 --heads 2 --head-dim 16 --threads 1 --runs 1 --precision bf16");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("bf16 products on "), std::string::npos) << table.out;
  const CliResult json =
      run("bench backward --seq 32 --heads 2 --head-dim 16 --threads 1 --runs 1 --precision bf16 "
          "--json");
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"precision\": \"bf16\""), std::string::npos) << json.out;
  const bool named = json.out.find("\"bf16_engine\": \"amx\"") != std::string::npos ||
                     json.out.find("\"bf16_engine\": \"vdpbf16ps\"") != std::string::npos ||
                     json.out.find("\"bf16_engine\": \"vector\"") != std::string::npos;
  EXPECT_TRUE(named) << json.out;
}

// Outside mpirun the ring bench says how to run it (with MPI built) or how to get MPI.
TEST_F(Cli, BenchRingOutsideMpirunSaysHow) { expect_error("bench ring --seq 64", "MPI"); }

TEST_F(Cli, ErrorsAreOneLineWithAStatusBelow128) {
  write_npy(path("x.npy"), rand_normal({2, 3, 10}, 6));
  write_npy(path("w.npy"), rand_normal({10, 10}, 7));
  const std::string w =
      " --wq " + path("w.npy") + " --wk " + path("w.npy") + " --wv " + path("w.npy");
  expect_error("mha --x " + path("x.npy") + w + " --heads 4 --out " + path("y.npy"),
               "d_model (10) must divide by n_heads (4)");
  EXPECT_FALSE(fs::exists(path("y.npy")));
  expect_error("sdpa --q " + path("nope.npy") + " --k " + path("nope.npy") + " --v " +
                   path("nope.npy") + " --out " + path("o.npy"),
               "nope.npy: cannot open");
  expect_error("sdpa --q " + path("x.npy") + " --k " + path("w.npy") + " --v " + path("w.npy") +
                   " --out " + path("o.npy"),
               "same rank");

  expect_error("sdpa --q " + path("x.npy"), "--k is required");
  expect_error("sdpa --q a --k b --v c --out d --impl turbo", "--impl");
  expect_error("demo --threads 0", "--threads: must be in [1, 1024], got 0");
  expect_error("frobnicate", "frobnicate");
  std::ofstream(path("bad.npy")) << "not numpy at all";
  expect_error("heatmap --weights " + path("bad.npy"), "not a .npy file");
  // Numeric options name their rule, and the hint names the command's own help.
  expect_error("generate --checkpoint " + path("none") + " --temperature -1",
               "--temperature: must be >= 0, got -1 (run 'attn generate --help')");
  expect_error("train --corpus x --out y --eval-interval 0", "--eval-interval: must be > 0, got 0");
  expect_error("train --corpus x", "--out is required (run 'attn train --help')");
  // A benchmark checks its lists before it measures or prints anything.
  for (const char* args :
       {"bench decode --cache 1024,0", "bench forward --seq 0", "bench backward --seq -3"}) {
    expect_error(args, "must be > 0, got ");
    EXPECT_EQ(run(args).out, "") << args;
  }
}

// A FIFO with no writer used to block open() forever; /dev/zero was read without end.
TEST_F(Cli, FifosAndDevicesNeitherHangNorReadForever) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  write_npy(path("q.npy"), rand_normal({2, 4}, 1));
  const std::string qkv =
      " --k " + path("q.npy") + " --v " + path("q.npy") + " --out " + path("o.npy");
  for (const std::string& input : {path("fifo"), std::string("/dev/zero")}) {
    const CliResult r = run("sdpa --q " + input + qkv, "/dev/null", "timeout 20");
    EXPECT_EQ(r.status, 1) << input << ": " << r.err;  // 124 would be the timeout
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_FALSE(fs::exists(path("o.npy")));
  }
  expect_error("sdpa --q /dev/zero" + qkv, "/dev/zero: is a character device, not a file");
  expect_error("sdpa --q " + path("fifo") + qkv, "not a .npy file");
  const CliResult bpe =
      run("bpe encode --tokenizer " + path("fifo") + " -", "/dev/null", "timeout 20");
  EXPECT_EQ(bpe.status, 1) << bpe.err;
}

// The weights array is sized before any work: 70000 × 70000 floats (18 GiB) cannot be a .npy
// file here, whatever the machine; before, it computed for a minute, then failed with a bare
// std::bad_alloc. No output file is written.
TEST_F(Cli, WeightsAreSizedBeforeAnyWork) {
  write_npy(path("q.npy"), rand_normal({70000, 1}, 1));
  const std::string args = "sdpa --q " + path("q.npy") + " --k " + path("q.npy") + " --v " +
                           path("q.npy") + " --out " + path("o.npy") + " --weights " +
                           path("w.npy");
  expect_error(args,
               "--weights (70000 rows × 70000 keys) would be 18.3 GiB, more than the 16.0 "
               "GiB a .npy file may hold here");
  EXPECT_FALSE(fs::exists(path("o.npy")));
  write_npy(path("x.npy"), rand_normal({1, 70000, 2}, 2));
  write_npy(path("w2.npy"), rand_normal({2, 2}, 3));
  const std::string w =
      " --wq " + path("w2.npy") + " --wk " + path("w2.npy") + " --wv " + path("w2.npy");
  expect_error("mha --x " + path("x.npy") + w + " --heads 2 --out " + path("o.npy") +
                   " --weights " + path("w.npy"),
               "--weights (2 heads × 70000 rows × 70000 keys) would be 36.5 GiB");
  EXPECT_FALSE(fs::exists(path("o.npy")));
}

TEST_F(Cli, RejectsNonFiniteInputs) {
  Tensor q = rand_normal({3, 4}, 8);
  q.at({1, 2}) = std::nanf("");
  write_npy(path("q.npy"), q);
  expect_error("sdpa --q " + path("q.npy") + " --k " + path("q.npy") + " --v " + path("q.npy") +
                   " --out " + path("o.npy"),
               "holds a non-finite value (nan) at flat index 6");
}

}  // namespace
}  // namespace attn
