// Bad input through every command, as a user gives it: malformed and lying .npy headers,
// non-finite and overflowing values, shape mismatches, broken tokenizer files and checkpoints,
// bad numbers for every numeric flag, unwritable and missing paths, FIFOs, /dev/zero and
// directories. Each case runs the CLI as a process and asserts what the user must see: exit
// status 1 or 2, exactly one line on stderr ("attn: error: …") naming the argument, nothing on
// stdout, no output file created or changed, and bounded time (30 s) and memory (1 GiB).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "attn/io.hpp"
#include "attn/random.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;  // exit status; 128 + signal; −1 when killed for taking too long
  std::string out, err;
  double seconds = 0;
  long max_rss_kib = 0;
};

using testing::slurp;

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// Runs the CLI with args (no shell: the arguments arrive exactly as given), stdin from
// stdin_path; kills it after kTimeout. The rusage of wait4 gives its peak memory.
constexpr double kTimeoutSeconds = 30;
Outcome run_cli(const std::vector<std::string>& args, const fs::path& dir,
                const std::string& stdin_path = "/dev/null") {
  const fs::path out = dir / "stdout", err = dir / "stderr";
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open(stdin_path.c_str(), O_RDONLY | O_NONBLOCK);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || o < 0 || e < 0) ::_exit(125);
    ::fcntl(in, F_SETFL, ::fcntl(in, F_GETFL) & ~O_NONBLOCK);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    std::string program = ATTN_CLI_PATH;
    argv.push_back(program.data());
    std::vector<std::string> copies = args;
    for (std::string& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(ATTN_CLI_PATH, argv.data());
    ::_exit(126);
  }
  Outcome r;
  int status = 0;
  rusage usage{};
  while (true) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (done == pid) break;
    if (r.seconds > kTimeoutSeconds) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      r.status = -1;
      r.out = slurp(out);
      r.err = slurp(err);
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.max_rss_kib = usage.ru_maxrss;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w == "{empty}" ? "" : w);
  return words;
}

// The files every case may use, made once: valid inputs of every kind, and the malformed
// ones. Outputs go to out/, which holds one file, existing.npy, that no case may change.
class Inputs {
 public:
  static Inputs& get() {
    static Inputs inputs;
    return inputs;
  }
  const fs::path& dir() const { return dir_; }
  fs::path out_dir() const { return dir_ / "out"; }
  // Replaces each {name} of text with the path of that input.
  std::string expand(std::string text) const {
    for (const auto& [name, value] : names_) {
      const std::string key = "{" + name + "}";
      for (size_t at; (at = text.find(key)) != std::string::npos;)
        text.replace(at, key.size(), value);
    }
    return text;
  }
  std::string existing_bytes() const { return existing_; }

 private:
  Inputs() {
    dir_ = fs::temp_directory_path() / ("attn_bad_inputs_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
    fs::create_directories(dir_ / "a_directory");
    name("dir", dir_ / "a_directory");
    name("out", dir_ / "out");
    name("missing", dir_ / "no_such_file.npy");
    name("fifo", dir_ / "fifo");
    ::mkfifo((dir_ / "fifo").c_str(), 0600);
    name("zero", "/dev/zero");
    arrays();
    malformed_arrays();
    text_inputs();
    existing_ = npy_bytes(Tensor({2}));
    write_bytes(dir_ / "out" / "existing.npy", existing_);
    name("existing", dir_ / "out" / "existing.npy");
  }
  ~Inputs() { fs::remove_all(dir_); }

  void name(const std::string& key, const fs::path& p) { names_[key] = p.string(); }
  void array(const std::string& key, const Tensor& t) {
    write_npy((dir_ / (key + ".npy")).string(), t);
    name(key, dir_ / (key + ".npy"));
  }
  void raw(const std::string& key, const std::string& bytes) {
    write_bytes(dir_ / key, bytes);
    name(key, dir_ / key);
  }

  static Tensor random(const Shape& shape, uint64_t seed) {
    Tensor t(shape);
    fill_normal(t, seed);
    return t;
  }

  void arrays() {
    array("q", random({2, 4, 8}, 1));      // (H, T, d)
    array("q_d6", random({2, 4, 6}, 2));   // another d
    array("v_t5", random({2, 5, 8}, 3));   // another Tk
    array("x", random({1, 4, 8}, 4));      // (B, T, d_model)
    array("w", random({8, 8}, 5));         // (d_model, d_model)
    array("w_bad", random({8, 6}, 6));     // not (d_model, d_model)
    array("b_bad", random({5}, 7));        // a bias of the wrong size
    array("mask_bad", random({3, 3}, 8));  // not broadcastable to (4, 4)
    Tensor weights({2, 4, 4});             // rows that sum to 1, for heatmap
    fill_uniform(weights, 0, 0.25f, 0.25f);
    array("weights", weights);
    array("scalar_row", random({4}, 10));  // rank 1: not weights
    Tensor big({2, 4, 8});
    for (int64_t i = 0; i < big.numel(); ++i) big.data()[i] = 3e38f;
    array("q_huge", big);  // finite, but the scores overflow
    Tensor nan = random({2, 4, 8}, 11);
    nan.data()[5] = std::nanf("");
    array("q_nan", nan);
    Tensor inf = random({2, 4, 8}, 12);
    inf.data()[3] = INFINITY;
    array("q_inf", inf);
  }

  // .npy images broken one way each; the valid header is taken from a real file.
  void malformed_arrays() {
    const std::string good = npy_bytes(random({2, 4, 8}, 13));
    const size_t header_end = good.find('\n') + 1;
    auto with_header = [&](const std::string& key, const std::string& dict) {
      std::string header = dict;
      while ((10 + header.size() + 1) % 64 != 0) header += ' ';
      header += '\n';
      std::string bytes = good.substr(0, 8);
      bytes += static_cast<char>(header.size() & 0xff);
      bytes += static_cast<char>(header.size() >> 8);
      raw(key, bytes + header + good.substr(header_end));
    };
    with_header("npy_fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4, 8), }");
    with_header("npy_big_endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 4, 8), }");
    with_header("npy_complex", "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 4, 4), }");
    with_header("npy_object", "{'descr': '|O', 'fortran_order': False, 'shape': (64,), }");
    with_header("npy_lying_shape",
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 9), }");
    with_header("npy_huge_shape",
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 4096), }");
    with_header("npy_rank0", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
    with_header("npy_rank5",
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 4, 8), }");
    with_header("npy_empty", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 8), }");
    with_header("npy_negative", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 4, 8), }");
    with_header("npy_no_descr", "{'fortran_order': False, 'shape': (2, 4, 8), }");
    with_header("npy_not_dict", "[1, 2, 3]");
    with_header("npy_unclosed", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 8");
    raw("npy_truncated", good.substr(0, good.size() - 7));
    raw("npy_trailing", good + "xyz");
    raw("npy_header_cut", good.substr(0, 40));
    raw("npy_magic_only", good.substr(0, 6));
    raw("npy_no_magic", "PK\x03\x04 a zip file, not numpy");
    std::string v3 = good;
    v3[6] = 3;
    raw("npy_version3", v3);
    std::string long_header = good;
    long_header[8] = '\xff';
    long_header[9] = '\xff';
    raw("npy_header_past_end", long_header);
    raw("npy_empty_file", "");
    // Float64 beyond float32's range: narrowing it would give inf.
    std::string f8 = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
    while ((10 + f8.size() + 1) % 64 != 0) f8 += ' ';
    f8 += '\n';
    std::string f8_bytes = good.substr(0, 8);
    f8_bytes += static_cast<char>(f8.size());
    f8_bytes += '\0';
    const double values[2] = {1.0, 1e300};
    raw("npy_f8_overflow",
        f8_bytes + f8 + std::string(reinterpret_cast<const char*>(values), sizeof values));
  }

  void text_inputs() {
    std::string corpus;
    for (int i = 0; i < 60; ++i) corpus += "the quick brown fox jumps over the lazy dog. ";
    raw("corpus", corpus);
    raw("empty_text", "");
    raw("ids_bad", "1 2 x3 4");
    raw("ids_negative", "1 -2");
    raw("ids_huge", "1 99999999999999");
    raw("ids_out_of_range", "1 2 999999");
    raw("not_json", "{\"format\": \"attn-bpe\", \"version\": 1, ");
    raw("json_array", "[1, 2, 3]");
    raw("json_other_format", "{\"format\": \"sentencepiece\", \"version\": 1}");
    raw("json_future", "{\"format\": \"attn-bpe\", \"version\": 99}");
    raw("nul_bytes", std::string("ab\0cd\0", 6));
    raw("config_bad", "n-layer = 2\nthis line has no equals sign\n");
    raw("config_unknown", "no-such-option = 3\n");
    // A tokenizer and a checkpoint made by the CLI itself, then broken.
    const std::string cli = ATTN_CLI_PATH;
    const fs::path tok = dir_ / "tok.json", run = dir_ / "run";
    name("tok", tok);
    const std::string train_tok = cli + " bpe train --corpus " + (dir_ / "corpus").string() +
                                  " --vocab-size 280 --byte-level --out " + tok.string() +
                                  " >/dev/null 2>&1";
    const std::string train_run =
        cli + " train --corpus " + (dir_ / "corpus").string() + " --out " + run.string() +
        " --n-layer 1 --n-embd 16 --n-head 2 --block-size 8 --batch-size 2 --max-iters 2" +
        " --eval-iters 1 --eval-interval 1 --threads 1 >/dev/null 2>&1";
    if (std::system(train_tok.c_str()) != 0 || std::system(train_run.c_str()) != 0) {
      throw std::runtime_error("cannot make the tokenizer and the checkpoint");
    }
    name("run", run);
    const fs::path ckpt = run / "checkpoint.safetensors";
    name("ckpt", ckpt);
    const std::string tok_json = slurp(tok), ckpt_bytes = slurp(ckpt);
    raw("tok_truncated", tok_json.substr(0, tok_json.size() / 2));
    raw("ckpt_truncated", ckpt_bytes.substr(0, ckpt_bytes.size() - 100));
    raw("ckpt_header_only", ckpt_bytes.substr(0, 4000));
    std::string lying = ckpt_bytes;
    lying[7] = '\x7f';  // a header length of ~2^63
    raw("ckpt_lying_length", lying);
    raw("ckpt_is_npy", npy_bytes(Tensor({4})));
    Safetensors file = read_safetensors(ckpt.string());
    auto rewrite = [&](const std::string& key, auto edit) {
      Safetensors copy = file;
      for (auto& entry : copy.tensors) entry.second = entry.second.clone();
      edit(copy);
      write_safetensors((dir_ / key).string(), copy.tensors, copy.metadata);
      name(key, dir_ / key);
    };
    rewrite("ckpt_nan", [](Safetensors& f) { f.tensors[2].second.data()[0] = std::nanf(""); });
    rewrite("ckpt_missing_tensor", [](Safetensors& f) { f.tensors.erase(f.tensors.begin()); });
    rewrite("ckpt_foreign", [](Safetensors& f) { f.metadata["format"] = "pytorch"; });
    rewrite("ckpt_bad_config", [](Safetensors& f) { f.metadata["config"] = "{\"n_layer\": -1}"; });
    rewrite("ckpt_bad_tokenizer", [](Safetensors& f) { f.metadata["tokenizer"] = "[]"; });
    rewrite("ckpt_inflated", [](Safetensors& f) {
      std::string& c = f.metadata["config"];
      c.replace(c.find("\"n_layer\":1"), 11, "\"n_layer\":1000");
    });
    rewrite("ckpt_wrong_shape", [](Safetensors& f) { f.tensors[0].second = Tensor({3, 3}); });
    fs::create_directories(dir_ / "empty_run");
    name("empty_run", dir_ / "empty_run");
  }

  fs::path dir_;
  std::map<std::string, std::string> names_;
  std::string existing_;
};

struct Case {
  std::string args;      // with {input} names, split at spaces
  std::string expected;  // words the error line must hold (after expansion)
  // bpe encode and decode stream: what came before the bad input has been written to stdout.
  bool streams = false;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.args; }

// The valid rest of each command line, so that the one bad argument is the error.
const std::string kSdpa = "sdpa --q {q} --k {q} --v {q} --out {out}/o.npy";
const std::string kMha = "mha --x {x} --wq {w} --wk {w} --wv {w} --heads 2 --out {out}/y.npy";
const std::string kHeatmap = "heatmap --weights {weights}";
const std::string kBpeTrain = "bpe train --corpus {corpus} --vocab-size 280 --out {out}/t.json";
const std::string kEncode = "bpe encode --tokenizer {tok} {corpus}";
const std::string kTrain =
    "train --corpus {corpus} --out {out}/run --n-layer 1 --n-embd 16 --n-head 2 --block-size 8 "
    "--batch-size 2 --max-iters 2 --eval-iters 1 --eval-interval 1 --threads 1";
const std::string kGenerate = "generate --checkpoint {ckpt} --max-new-tokens 3 --prompt the";
const std::string kForward = "bench forward --seq 64 --heads 1 --runs 1 --threads 1";
const std::string kDecode = "bench decode --cache 64 --heads 1 --runs 1 --threads 1";
const std::string kGenerateBench = "bench generate --threads 1 --runs 1 --new-tokens 16";
const std::string kExport = "export --hf {out}/hf --random gpt2";

// Bad numbers for one flag of a command: each must be named in the error.
void numbers(std::vector<Case>& cases, const std::string& command, const std::string& flag,
             const std::vector<std::string>& values) {
  for (const std::string& v : values) cases.push_back({command + " " + flag + " " + v, flag});
}

// A number that is fine alone but breaks a rule between flags: the error names both values.
void clash(std::vector<Case>& cases, const std::string& command, const std::string& flag,
           const std::string& value, const std::string& named) {
  cases.push_back({command + " " + flag + " " + value, named});
}

const std::vector<std::string> kNotPositive = {"0", "-3", "abc", "1.5", "99999999999999999999"};
const std::vector<std::string> kNotNonNegative = {"-1", "abc", "2.5", "99999999999999999999"};
const std::vector<std::string> kNotThreads = {"0", "1025", "x"};
const std::vector<std::string> kNotAFloat = {"abc", "nan", "inf", "1e999"};

std::vector<Case> numeric_cases() {
  std::vector<Case> c;
  numbers(c, kSdpa, "--window", kNotPositive);
  numbers(c, kSdpa, "--scale", kNotAFloat);
  numbers(c, kSdpa, "--precision", {"q8", "fp16"});
  numbers(c, kSdpa, "--threads", kNotThreads);
  numbers(c, kMha, "--heads", {"0", "-2", "x"});
  clash(c, kMha, "--heads", "3", "d_model (8) must divide by n_heads (3)");
  numbers(c, kMha, "--kv-heads", {"0", "x"});
  clash(c, kMha, "--kv-heads", "3", "n_kv_heads (3) must divide n_heads (2)");
  numbers(c, kMha, "--window", {"0", "-1"});
  numbers(c, kMha, "--threads", kNotThreads);
  numbers(c, kHeatmap, "--head", {"-1", "2", "x"});  // two heads: 0 and 1
  numbers(c, kHeatmap, "--batch", {"-1", "1", "x"});
  numbers(c, kHeatmap, "--width", {"-1", "x"});
  numbers(c, kBpeTrain, "--vocab-size", {"0", "16777217", "x", "-5"});
  numbers(c, kBpeTrain, "--min-frequency", {"0", "-1", "x"});
  numbers(c, kBpeTrain, "--threads", kNotThreads);
  numbers(c, kEncode, "--threads", kNotThreads);
  numbers(c, kTrain, "--n-layer", {"0", "-1", "x", "2000"});
  numbers(c, kTrain, "--n-head", {"0", "x"});
  clash(c, kTrain, "--n-head", "3", "--n-embd (16) must divide by --n-head (3)");
  numbers(c, kTrain, "--n-kv-head", {"-1", "x"});
  clash(c, kTrain, "--n-kv-head", "3", "--n-kv-head (3) must divide --n-head (2)");
  numbers(c, kTrain, "--n-embd", {"0", "x", "100000"});
  numbers(c, kTrain, "--block-size", {"0", "x", "2000000"});
  clash(c, kTrain, "--block-size", "5000", "need at least block_size + 1 = 5001");
  numbers(c, kTrain, "--dropout", {"-0.1", "1", "nan", "x"});
  numbers(c, kTrain, "--batch-size", {"0", "-4", "x"});
  numbers(c, kTrain, "--grad-accum", {"0", "x"});
  numbers(c, kTrain, "--max-iters", {"-5", "x"});
  numbers(c, kTrain, "--lr", {"0", "-1", "nan", "x"});
  numbers(c, kTrain, "--min-lr", {"-1", "nan"});
  clash(c, kTrain, "--min-lr", "1", "--min-lr (1) must be <= --lr (0.001)");
  numbers(c, kTrain, "--warmup-iters", {"-1", "x"});
  numbers(c, kTrain, "--lr-decay-iters", {"-1", "x"});
  numbers(c, kTrain, "--weight-decay", {"-1", "nan", "x"});
  numbers(c, kTrain, "--beta2", {"1.5", "-0.1", "nan"});
  numbers(c, kTrain, "--grad-clip", {"nan", "x"});
  numbers(c, kTrain, "--eval-interval", {"0", "x"});
  numbers(c, kTrain, "--eval-iters", {"0", "x"});
  numbers(c, kTrain, "--val-fraction", {"0", "0.6", "-0.1", "x"});
  numbers(c, kTrain, "--log-interval", {"0", "x"});
  numbers(c, kTrain, "--seed", {"-1", "x"});
  numbers(c, kTrain + " --tokenizer bpe", "--vocab-size", {"10", "2000000", "x"});
  numbers(c, kTrain, "--threads", kNotThreads);
  numbers(c, kGenerate, "--num-samples", {"0", "x"});
  numbers(c, kGenerate, "--max-new-tokens", {"-1", "x"});
  numbers(c, kGenerate, "--temperature", {"-1", "nan", "x"});
  numbers(c, kGenerate, "--top-k", {"-1", "x"});
  numbers(c, kGenerate, "--top-p", {"0", "1.5", "nan"});
  numbers(c, kGenerate, "--seed", {"-1", "x"});
  numbers(c, kGenerate, "--threads", kNotThreads);
  numbers(c, kGenerate, "--cache-dtype", {"q4", "int8"});
  numbers(c, kForward, "--seq", {"0", "64,-1", "x"});
  numbers(c, kForward, "--batch", {"0", "x"});
  numbers(c, kForward, "--heads", {"0", "x"});
  numbers(c, kForward, "--kv-heads", {"0", "x"});
  clash(c, kForward, "--kv-heads", "2", "--kv-heads");
  numbers(c, kForward, "--head-dim", {"0", "x"});
  numbers(c, kForward, "--runs", {"0", "1001"});
  numbers(c, kDecode, "--cache", {"0", "x"});
  numbers(c, kDecode, "--runs", {"0", "100001"});
  numbers(c, kDecode, "--head-dim", {"0"});
  numbers(c, kDecode, "--cache-dtype", {"q4", "f32,int8"});
  numbers(c, kGenerateBench, "--prompt-tokens", kNotPositive);
  numbers(c, kGenerateBench, "--new-tokens", {"-1", "x"});
  numbers(c, kGenerateBench, "--runs", {"0", "1001"});
  clash(c, kGenerateBench, "--prompt-tokens", "1010", "(1026) exceed the model's 1024 positions");
  c.push_back({kGenerateBench + " --shape gpt3", "unknown GPT-2 shape \"gpt3\""});
  numbers(c, kExport, "--seed", {"-1", "x"});
  c.push_back({"export --hf {out}/hf --random gpt9", "gpt9"});
  c.push_back({"export --hf {out}/hf --checkpoint {ckpt} --random gpt2", "--checkpoint excludes"});
  c.push_back({"export --hf {existing} --random gpt2", "--hf must be a directory"});
  numbers(c, "demo", "--d-model", {"0", "x"});
  clash(c, "demo", "--d-model", "7", "--d-model (7) must divide by --heads (4)");
  numbers(c, "demo", "--heads", {"0", "x"});
  clash(c, "demo", "--heads", "3", "--d-model (16) must divide by --heads (3)");
  numbers(c, "demo", "--seed", {"-1"});
  numbers(c, "demo", "--threads", kNotThreads);
  // Sizes each valid alone whose product is more memory than a machine has: refused before any
  // allocation, saying how much they would need.
  c.push_back({"bench forward --seq 100000000 --heads 16 --runs 1 --threads 1", "GiB"});
  c.push_back({"bench decode --cache 100000000000 --heads 16 --runs 1 --threads 1", "GiB"});
  c.push_back({kTrain + " --n-layer 1024 --n-embd 65536", "GiB"});
  c.push_back({"demo --d-model 1000000000 --heads 1", "GiB"});
  return c;
}

// Every file-taking option given what is not a readable file of its kind.
std::vector<Case> path_cases() {
  std::vector<Case> c;
  for (const char* bad : {"{missing}", "{dir}", "{fifo}", "{zero}"}) {
    c.push_back({"sdpa --q " + std::string(bad) + " --k {q} --v {q} --out {out}/o.npy", bad});
    c.push_back(
        {"sdpa --q {q} --k {q} --v {q} --mask " + std::string(bad) + " --out {out}/o.npy", bad});
    c.push_back(
        {"mha --x {x} --wq " + std::string(bad) + " --wk {w} --wv {w} --heads 2 --out {out}/y.npy",
         bad});
    c.push_back({"heatmap --weights " + std::string(bad), bad});
    c.push_back(
        {"bpe train --corpus " + std::string(bad) + " --vocab-size 280 --out {out}/t.json", bad});
    c.push_back({"bpe encode --tokenizer " + std::string(bad) + " {corpus}", bad});
    c.push_back({"bpe decode --tokenizer " + std::string(bad) + " {ids_bad}", bad});
    c.push_back({"generate --checkpoint " + std::string(bad), bad});
    c.push_back({"generate --model " + std::string(bad), bad});
    c.push_back({"export --hf {out}/hf --checkpoint " + std::string(bad), bad});
    c.push_back({"bench generate --threads 1 --runs 1 --model " + std::string(bad), bad});
    c.push_back({"explore --checkpoint " + std::string(bad) + " --text the", bad});
    c.push_back({"explore --weights " + std::string(bad), bad});
    c.push_back({"explore --checkpoint {ckpt} --text-file " + std::string(bad), bad});
    c.push_back({kTrain + " --tokenizer " + std::string(bad), bad});
  }
  // The path itself is the error: one case each for the remaining readers.
  c.push_back({"bpe encode --tokenizer {tok} {missing}", "{missing}"});
  c.push_back({"bpe decode --tokenizer {tok} {dir}", "{dir}"});
  c.push_back({"train --corpus {zero} --out {out}/run", "{zero}"});
  c.push_back({"train --corpus {missing} --out {out}/run", "{missing}"});
  c.push_back({"generate --checkpoint {ckpt} --prompt-file {missing}", "{missing}"});
  c.push_back({"generate --checkpoint {ckpt} --prompt-file {empty_text}", "the prompt is empty"});
  c.push_back({"train --config {missing} --corpus {corpus} --out {out}/run", "{missing}"});
  c.push_back({"train --config {config_bad} --corpus {corpus} --out {out}/run", "config_bad"});
  c.push_back(
      {"train --config {config_unknown} --corpus {corpus} --out {out}/run", "no-such-option"});
  c.push_back({"generate --checkpoint {empty_run}", "{empty_run}"});
  // Outputs that cannot be written: under a file, a directory in the way, a missing directory.
  c.push_back({"sdpa --q {q} --k {q} --v {q} --out {existing}/o.npy", "o.npy"});
  c.push_back({"sdpa --q {q} --k {q} --v {q} --out {dir}", "{dir}"});
  c.push_back({"sdpa --q {q} --k {q} --v {q} --out {out}/no/such/dir/o.npy", "o.npy"});
  c.push_back({kSdpa + " --weights {existing}/w.npy", "w.npy"});
  c.push_back({kSdpa + " --weights {dir}", "{dir}"});
  c.push_back({"sdpa --q {q} --k {q} --v {q} --out - --weights -", "standard output"});
  c.push_back({kMha + " --weights {out}/no/such/dir/w.npy", "w.npy"});
  c.push_back({"bpe train --corpus {corpus} --vocab-size 280 --out {existing}/t.json", "t.json"});
  c.push_back({"bpe train --corpus {corpus} --vocab-size 280 --out {dir}", "{dir}"});
  c.push_back({"train --corpus {corpus} --out {existing}", "{existing}"});
  c.push_back({"train --corpus {corpus} --out {run} --n-layer 2", "{run}"});  // a run is there
  c.push_back({"train --corpus {corpus} --out {out}/fresh --resume", "checkpoint"});
  return c;
}

// Malformed contents: arrays, shapes, values, tokenizers, checkpoints, ids.
std::vector<Case> content_cases() {
  std::vector<Case> c;
  for (const char* npy :
       {"npy_fortran",    "npy_big_endian", "npy_complex",  "npy_object",    "npy_lying_shape",
        "npy_huge_shape", "npy_rank0",      "npy_rank5",    "npy_empty",     "npy_negative",
        "npy_no_descr",   "npy_not_dict",   "npy_unclosed", "npy_truncated", "npy_trailing",
        "npy_header_cut", "npy_magic_only", "npy_no_magic", "npy_version3",  "npy_header_past_end",
        "npy_empty_file", "npy_f8_overflow"}) {
    const std::string in = std::string("{").append(npy).append("}");
    c.push_back({"sdpa --q " + in + " --k {q} --v {q} --out {out}/o.npy", npy});
    c.push_back({"heatmap --weights " + in, npy});
  }
  for (const char* npy : {"npy_fortran", "npy_lying_shape", "npy_empty", "npy_f8_overflow"}) {
    c.push_back({"mha --x {" + std::string(npy) +
                     "} --wq {w} --wk {w} --wv {w} --heads 2 --out {out}/y.npy",
                 npy});
  }
  // Values.
  c.push_back({"sdpa --q {q_nan} --k {q} --v {q} --out {out}/o.npy", "q_nan"});
  c.push_back({"sdpa --q {q} --k {q_inf} --v {q} --out {out}/o.npy", "q_inf"});
  c.push_back({"sdpa --q {q} --k {q} --v {q_nan} --out {out}/o.npy", "q_nan"});
  c.push_back({"sdpa --q {q_huge} --k {q_huge} --v {q} --out {out}/o.npy", "overflow"});
  c.push_back({"mha --x {q_nan} --wq {w} --wk {w} --wv {w} --heads 2 --out {out}/y.npy", "q_nan"});
  c.push_back({"sdpa --q {q} --k {q} --v {q} --mask {q_nan} --out {out}/o.npy", "q_nan"});
  c.push_back({"sdpa --q {q} --k {q} --v {q} --mask {q_inf} --out {out}/o.npy", "q_inf"});
  // Shapes.
  c.push_back({"sdpa --q {q} --k {q_d6} --v {q} --out {out}/o.npy", "d"});
  c.push_back({"sdpa --q {q} --k {q} --v {v_t5} --out {out}/o.npy", "v"});
  c.push_back({"sdpa --q {q} --k {q} --v {q} --mask {mask_bad} --out {out}/o.npy", "mask"});
  c.push_back({"sdpa --q {x} --k {w} --v {w} --out {out}/o.npy", "rank"});
  c.push_back({"mha --x {x} --wq {w_bad} --wk {w} --wv {w} --heads 2 --out {out}/y.npy", "wq"});
  c.push_back({"mha --x {x} --wq {w} --wk {w} --wv {w_bad} --heads 2 --out {out}/y.npy", "wv"});
  c.push_back({kMha + " --bq {b_bad}", "bq"});
  c.push_back({kMha + " --bo {b_bad}", "bo"});
  c.push_back({kMha + " --wo {w_bad} --bo {b_bad}", "bo"});
  c.push_back({"heatmap --weights {scalar_row}", "got (4)"});
  c.push_back({kHeatmap + " --tokens a,b", "--tokens"});
  c.push_back({kHeatmap + " --png {out}/h.png --tokens a,b", "--tokens"});
  c.push_back({kHeatmap + " --grid --png {out}/h.png --max-cells 0", "--max-cells"});
  c.push_back({kHeatmap + " --svg {dir}", "{dir}"});
  c.push_back({"explore --weights {scalar_row}", "got (4)"});
  c.push_back({"explore --weights {weights} --tokens a", "--tokens gives 1 label for the 4 keys"});
  c.push_back({"explore --weights {weights} --out {dir}", "{dir}"});
  // Tokenizers.
  for (const char* tok : {"not_json", "json_array", "json_other_format", "json_future",
                          "tok_truncated", "nul_bytes", "empty_text"}) {
    const std::string in = "{" + std::string(tok) + "}";
    c.push_back({"bpe encode --tokenizer " + in + " {corpus}", tok});
    c.push_back({kTrain + " --tokenizer " + in, tok});
  }
  c.push_back({"bpe decode --tokenizer {tok} {ids_bad}", "x3", true});
  c.push_back({"bpe decode --tokenizer {tok} {ids_negative}", "-2", true});
  c.push_back({"bpe decode --tokenizer {tok} {ids_huge}", "99999999999999", true});
  c.push_back({"bpe decode --tokenizer {tok} {ids_out_of_range}", "999999", true});
  c.push_back({"bpe decode --tokenizer {tok} {nul_bytes}", "\\x00"});
  c.push_back({"bpe encode --tokenizer {ckpt} {corpus}", "{ckpt}"});
  c.push_back({kTrain + " --tokenizer {ckpt}", "{ckpt}"});
  c.push_back({"bpe train --corpus {empty_text} --vocab-size 280 --out {out}/t.json",
               "the corpus is empty"});
  c.push_back({"bpe train --corpus {corpus} --vocab-size 280 --special {empty} --out {out}/t.json",
               "special"});
  c.push_back({"train --corpus {empty_text} --out {out}/run", "empty_text"});
  // Checkpoints.
  for (const char* ckpt : {"ckpt_truncated", "ckpt_header_only", "ckpt_lying_length", "ckpt_is_npy",
                           "ckpt_missing_tensor", "ckpt_foreign", "ckpt_bad_config",
                           "ckpt_bad_tokenizer", "ckpt_inflated", "ckpt_wrong_shape", "corpus"}) {
    c.push_back({"generate --checkpoint {" + std::string(ckpt) + "}", ckpt});
  }
  c.push_back({"generate --checkpoint {ckpt_nan}", "ckpt_nan: checkpoint: tensor \""});
  c.push_back({kGenerate + " --prompt Quick", "\"Q\" (byte offset 0) is not in the vocabulary"});
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> all = numeric_cases();
  for (auto more : {path_cases(), content_cases()}) all.insert(all.end(), more.begin(), more.end());
  return all;
}

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, IsOneClearLineAndChangesNothing) {
  const Inputs& inputs = Inputs::get();
  const Case& c = GetParam();
  const std::string args = inputs.expand(c.args), expected = inputs.expand(c.expected);
  const Outcome r = run_cli(split(args), inputs.dir());
  ASSERT_NE(r.status, -1) << "took more than " << kTimeoutSeconds << " s: " << args;
  EXPECT_TRUE(r.status == 1 || r.status == 2) << "status " << r.status << ": " << args << "\n"
                                              << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind("attn: error: ", 0), 0u) << args << "\nstderr: " << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos)
      << "the error should name " << expected << ": " << args << "\nstderr: " << r.err;
  if (!c.streams) {
    EXPECT_EQ(r.out, "") << args;
  }
  EXPECT_LT(r.max_rss_kib, 1L << 20) << "more than 1 GiB: " << args;
  // out/ holds exactly what it held: existing.npy, unchanged.
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(inputs.out_dir())) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"existing.npy"}) << args;
  EXPECT_EQ(slurp(inputs.out_dir() / "existing.npy"), inputs.existing_bytes()) << args;
  for (const auto& entry : fs::directory_iterator(inputs.out_dir())) {
    if (entry.path().filename() != "existing.npy") fs::remove_all(entry.path());
  }
}

// Three suites, one ctest each, so that ctest -j runs them side by side.
INSTANTIATE_TEST_SUITE_P(Numbers, BadInput, ::testing::ValuesIn(numeric_cases()));
INSTANTIATE_TEST_SUITE_P(Paths, BadInput, ::testing::ValuesIn(path_cases()));
INSTANTIATE_TEST_SUITE_P(Contents, BadInput, ::testing::ValuesIn(content_cases()));

// The table is the suite's claim: at least 150 inputs, each a different command line.
TEST(BadInputTable, HoldsAtLeast150DistinctCases) {
  const std::vector<Case> cases = all_cases();
  std::vector<std::string> lines;
  for (const Case& c : cases) lines.push_back(c.args);
  std::sort(lines.begin(), lines.end());
  const auto twice = std::adjacent_find(lines.begin(), lines.end());
  EXPECT_EQ(twice, lines.end()) << "twice in the table: " << *twice;
  EXPECT_GE(cases.size(), 150u);
}

}  // namespace
}  // namespace attn
