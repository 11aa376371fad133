// GPT-2's tokenizer against the reference implementations: the ids tiktoken and transformers'
// GPT2TokenizerFast agree on (tests/fixtures/make_gpt2_tokenizer_fixtures.py) for 367 texts — many
// scripts, numbers, emoji, combining marks, contractions, whitespace runs, special tokens,
// random strings — and a 1 MB text; the same ids from every file layout; exact round trips of
// any bytes, invalid UTF-8 included; a clear error for each kind of broken file.
#include "attn/gpt2_tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::ThrowsWith;

const fs::path kGpt2TokenizerDir = fs::path(ATTN_FIXTURES_DIR) / "gpt2";

using testing::slurp;

const Gpt2Tokenizer& gpt2() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(kGpt2TokenizerDir.string());
  return t;
}

struct OracleCase {
  std::string text;
  std::vector<int64_t> ids;
};

std::vector<OracleCase> cases() {
  std::vector<OracleCase> out;
  for (const auto& c : nlohmann::json::parse(slurp(kGpt2TokenizerDir / "cases.json"))) {
    out.push_back({c["text"].get<std::string>(), c["ids"].get<std::vector<int64_t>>()});
  }
  return out;
}

// The first id where two sequences differ, for a readable failure.
std::string first_difference(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream s;
  s << "first difference at id " << i << " of " << want.size() << " (got "
    << (i < got.size() ? std::to_string(got[i]) : "end") << ", want "
    << (i < want.size() ? std::to_string(want[i]) : "end") << ")";
  return s.str();
}

TEST(Gpt2Tokenizer, GivesTheReferenceIdsForEveryCase) {
  const std::vector<OracleCase> all = cases();
  ASSERT_EQ(all.size(), 367u);
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().special_id("<|endoftext|>"), 50256);
  for (const OracleCase& c : all) {
    const std::vector<int64_t> got = gpt2().encode(c.text);
    EXPECT_EQ(got, c.ids) << nlohmann::json(c.text).dump() << ": " << first_difference(got, c.ids);
    EXPECT_EQ(gpt2().decode(got), c.text);
  }
}

TEST(Gpt2Tokenizer, KnownIds) {
  // GPT-2's ids that everyone quotes: "Hello" 15496, " world" 995, "<|endoftext|>" 50256.
  EXPECT_EQ(gpt2().encode("Hello world<|endoftext|>"), (std::vector<int64_t>{15496, 995, 50256}));
  EXPECT_EQ(gpt2().display(995), "\xc4\xa0world");  // "Ġworld"
  // Generation without a prompt starts after <|endoftext|>, as GPT-2 was trained.
  EXPECT_EQ(gpt2().default_prompt(), (std::vector<int64_t>{50256}));
}

// attn::Tokenizer holds GPT-2's tokenizer as it holds attn's own: the same ids, tokens and
// first prompt; only its JSON form is refused (it lives in Hugging Face's files).
TEST(Gpt2Tokenizer, TheOneTokenizerInterfaceHoldsIt) {
  const Tokenizer any(gpt2());
  EXPECT_EQ(any.kind(), "gpt2");
  ASSERT_NE(any.gpt2(), nullptr);
  EXPECT_EQ(any.bpe(), nullptr);
  const std::string text = "Hello world, the interface: \xe2\x80\x94 one for all.\n";
  EXPECT_EQ(any.encode(text), gpt2().encode(text));
  EXPECT_EQ(any.decode(any.encode(text)), text);
  EXPECT_EQ(any.display(995), "\xc4\xa0world");
  EXPECT_EQ(any.vocab_size(), gpt2().vocab_size());
  EXPECT_EQ(any.default_prompt(), (std::vector<int64_t>{50256}));
  EXPECT_TRUE(testing::ThrowsWith([&] { any.to_json(); }, "kept in Hugging Face's files"));
}

TEST(Gpt2Tokenizer, OneMegabyteTextGivesTheReferenceIds) {
  const std::string text = slurp(kGpt2TokenizerDir / "mixed_1mb.txt");
  ASSERT_EQ(text.size(), size_t{1} << 20);
  const std::string raw = slurp(kGpt2TokenizerDir / "mixed_1mb.ids");
  std::vector<int64_t> want(raw.size() / 2);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = static_cast<unsigned char>(raw[2 * i]) | static_cast<unsigned char>(raw[2 * i + 1])
                                                           << 8;
  }
  const std::vector<int64_t> got = gpt2().encode(text);
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << first_difference(got, want);
  EXPECT_TRUE(gpt2().decode(got) == text);
  // Cut into parts at line starts and encoded side by side: the same ids, for 1 to 7 parts.
  const int threads = num_threads();
  for (const int n : {1, 2, 3, 7}) {
    set_num_threads(n);
    const std::vector<int64_t> parallel = gpt2().encode_parallel(text);
    EXPECT_TRUE(parallel == want) << n << " threads: " << first_difference(parallel, want);
  }
  set_num_threads(threads);
}

TEST(Gpt2Tokenizer, EncodeBatchEqualsEncodeOnAnyThreadCount) {
  std::vector<std::string> texts;
  for (const OracleCase& c : cases()) texts.push_back(c.text);
  // Empty texts and more threads than texts: runs that hold nothing, or only empty texts.
  texts.insert(texts.begin() + 1, "");
  texts.push_back("");
  const int threads = num_threads();
  for (const int n : {1, 2, 3, 7, 64}) {
    set_num_threads(n);
    const std::vector<std::vector<int64_t>> batch = gpt2().encode_batch(texts);
    ASSERT_EQ(batch.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], gpt2().encode(texts[i]));
  }
  EXPECT_TRUE(gpt2().encode_batch({}).empty());
  EXPECT_EQ(gpt2().encode_batch({"", ""}), (std::vector<std::vector<int64_t>>{{}, {}}));
  set_num_threads(threads);
}

class Gpt2Files : public testing::TempDirTest {};

// Hugging Face's vocab.json + merges.txt and tokenizer.json (merges as strings and as pairs)
// hold the same data: the same ids.
TEST_F(Gpt2Files, EveryLayoutGivesTheSameIds) {
  const std::string vocab = slurp(kGpt2TokenizerDir / "encoder.json"),
                    merges = slurp(kGpt2TokenizerDir / "vocab.bpe");
  fs::create_directories(path("hf"));
  std::ofstream(path("hf/vocab.json"), std::ios::binary) << vocab;
  std::ofstream(path("hf/merges.txt"), std::ios::binary) << merges;
  nlohmann::json merge_lines = nlohmann::json::array(), merge_pairs = nlohmann::json::array();
  std::istringstream lines(merges);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    merge_lines.push_back(line);
    merge_pairs.push_back({line.substr(0, line.find(' ')), line.substr(line.find(' ') + 1)});
  }
  nlohmann::json file = {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"model",
       {{"type", "BPE"}, {"vocab", nlohmann::json::parse(vocab)}, {"merges", merge_lines}}}};
  fs::create_directories(path("json"));
  std::ofstream(path("json/tokenizer.json"), std::ios::binary) << file.dump();
  file["model"]["merges"] = merge_pairs;
  std::ofstream(path("pairs.json"), std::ios::binary) << file.dump();
  std::ofstream(path("tokenizer.json"), std::ios::binary) << file.dump();

  const std::string probe = "Hello <|endoftext|> wörld's 12345 😀\n\n  end";
  const std::vector<int64_t> want = gpt2().encode(probe);
  for (const std::string& where :
       {path("hf"), path("hf/merges.txt"), path("json"), path("tokenizer.json"),
        (kGpt2TokenizerDir / "encoder.json").string()}) {
    EXPECT_EQ(Gpt2Tokenizer::load(where).encode(probe), want) << where;
  }
  EXPECT_EQ(Gpt2Tokenizer::from_tokenizer_json(slurp(path("pairs.json"))).encode(probe), want);
}

// Any bytes round-trip; a byte that starts no valid UTF-8 sequence is a character of its own
// (neither letter, number nor space), so it splits a word around it.
TEST(Gpt2Tokenizer, AnyBytesRoundTripAndInvalidUtf8IsItsOwnPiece) {
  std::mt19937 rng(5);
  for (int i = 0; i < 500; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    EXPECT_EQ(gpt2().decode(gpt2().encode(bytes)), bytes);
  }
  std::vector<int64_t> pieces = gpt2().encode("abc");
  const std::vector<int64_t> ff = gpt2().encode("\xff");
  ASSERT_EQ(ff.size(), 1u);
  pieces.push_back(ff[0]);
  for (const int64_t id : gpt2().encode("def")) pieces.push_back(id);
  EXPECT_EQ(gpt2().encode("abc\xff"
                          "def"),
            pieces);
  // Overlong, surrogate and truncated forms are invalid too: each byte on its own.
  for (const std::string bad : {"\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80"}) {
    EXPECT_EQ(gpt2().decode(gpt2().encode(bad)), bad);
  }
}

TEST_F(Gpt2Files, BrokenFilesFailClearly) {
  const std::string vocab = slurp(kGpt2TokenizerDir / "encoder.json"),
                    merges = slurp(kGpt2TokenizerDir / "vocab.bpe");
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges("{", merges); }, "not JSON"));
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges("[1]", merges); },
                         "expected a JSON object"));
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges(R"({"a": -1})", ""); },
                         "must be an integer in [0, 2^24)"));
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges(R"({"a": 7, "b": 7})", ""); },
                         "\"a\" and \"b\" have the same id 7"));  // found by the gpt2 fuzzer
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges(R"({"a": 0})", ""); },
                         "no token for byte 0"));
  EXPECT_TRUE(
      ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges(vocab, "#version: 0.2\nab\n"); },
                 "line 2 must be two tokens and one space"));
  EXPECT_TRUE(
      ThrowsWith([&] { Gpt2Tokenizer::from_vocab_and_merges(vocab, "\xc4\xa0the \xc4\xa0the\n"); },
                 "merge 0 makes \"\xc4\xa0the\xc4\xa0the\", which the vocabulary lacks"));
  EXPECT_TRUE(ThrowsWith(
      [&] { Gpt2Tokenizer::from_tokenizer_json(R"({"model": {"type": "Unigram"}})"); }, "not BPE"));
  // A "type" that is not a string (found by the gpt2 fuzzer): attn's error, not the JSON
  // library's exception.
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::from_tokenizer_json(R"({"model": {"type": 3}})"); },
                         "the model's \"type\" must be a string, got 3"));
  // GPT-2's own pre-tokenizer is read; another would give other pieces, so it is refused.
  nlohmann::json with_pre = nlohmann::json::parse(
      R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "_"}})");
  EXPECT_TRUE(ThrowsWith(
      [&] { Gpt2Tokenizer::from_tokenizer_json(with_pre.dump()); },
      "the pre-tokenizer {\"replacement\":\"_\",\"type\":\"Metaspace\"} is not GPT-2's"));
  with_pre["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  EXPECT_TRUE(
      ThrowsWith([&] { Gpt2Tokenizer::from_tokenizer_json(with_pre.dump()); }, "is not GPT-2's"));
  EXPECT_TRUE(ThrowsWith([&] { gpt2().decode(std::vector<int64_t>{50257}); },
                         "id 50257 is not in the vocabulary"));
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::load(path("nothing")); }, "not GPT-2's tokenizer"));
  std::ofstream(path("vocab.json")) << vocab;  // and no merges.txt beside it
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::load(path("vocab.json")); }, "merges.txt"));
}

// More merge lines than any vocabulary could use are refused by their count, before a string
// is built (20 million lines once took 2.2 GB and were accepted), naming the merges file.
TEST_F(Gpt2Files, MoreMergesThanAnyVocabularyAreRefusedFirst) {
  std::string lines = "#version: 0.2\n";
  for (int64_t i = 0; i <= (int64_t{1} << 24); ++i) lines += "a b\n";
  std::ofstream(path("encoder.json")) << slurp(kGpt2TokenizerDir / "encoder.json");
  std::ofstream(path("vocab.bpe")) << lines;
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::load(path("")); },
                         "vocab.bpe: GPT-2 merges: 16777218 lines, more than any vocabulary's "
                         "merges (16777216)"));
  // One bad line is about the merges file too; a bad vocabulary about the vocabulary's.
  std::ofstream(path("vocab.bpe")) << "#version: 0.2\nab\n";
  EXPECT_TRUE(
      ThrowsWith([&] { Gpt2Tokenizer::load(path("")); }, "vocab.bpe: GPT-2 merges: line 2"));
  std::ofstream(path("encoder.json")) << "{";
  EXPECT_TRUE(ThrowsWith([&] { Gpt2Tokenizer::load(path("")); }, "encoder.json: GPT-2 vocabulary"));
}

}  // namespace
}  // namespace attn
