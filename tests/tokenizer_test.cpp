// The tokenizers: the tutorial's call, exact round trips, determinism, the fast trainer
// against a naive one that rescans every word per merge, special tokens, the file format
// (every kind of broken file, and random mutations of a valid one), CharTokenizer.
#include "attn/tokenizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <random>
#include <string>

#include "attn/threads.hpp"
#include "attn/walkthrough.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;

const std::string kTutorialCorpus = tutorial_corpus();  // attn/walkthrough.hpp

using testing::shakespeare_excerpt;

BpeOptions options(int64_t vocab_size, bool byte_level, int64_t min_frequency = 2) {
  BpeOptions o;
  o.vocab_size = vocab_size;
  o.byte_level = byte_level;
  o.min_frequency = min_frequency;
  return o;
}

TEST(SplitWords, WhitespaceTravelsWithTheFollowingWord) {
  std::vector<std::string> words;
  split_words("Hello,  world!\n\n42 apples ", [&](std::string_view w) { words.emplace_back(w); });
  EXPECT_EQ(words,
            (std::vector<std::string>{"Hello", ",", "  world", "!", "\n\n42", " apples", " "}));
  words.clear();
  split_words("", [&](std::string_view w) { words.emplace_back(w); });
  EXPECT_TRUE(words.empty());
  split_words("caf\xC3\xA9s", [&](std::string_view w) { words.emplace_back(w); });
  EXPECT_EQ(words, (std::vector<std::string>{"caf\xC3\xA9s"}));  // UTF-8 stays in the word
}

TEST(BpeTokenizer, TheTutorialsCall) {
  const BpeTokenizer t = BpeTokenizer::train(kTutorialCorpus, options(80, false));
  const std::vector<int64_t> ids = t.encode("the quick brown fox");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(t.id_to_token(ids[0]), "the");
  EXPECT_EQ(t.id_to_token(ids[1]), " quick");
  EXPECT_EQ(t.id_to_token(ids[2]), " brown");
  EXPECT_EQ(t.id_to_token(ids[3]), " fox");
  EXPECT_EQ(t.decode(ids), "the quick brown fox");
  EXPECT_LE(t.vocab_size(), 80);
  EXPECT_EQ(t.display(ids[1]), "\u2581quick");
}

TEST(BpeTokenizer, ByteLevelRoundTripsAnyBytes) {
  const BpeTokenizer t =
      BpeTokenizer::train(shakespeare_excerpt().substr(0, 200000), options(600, true));
  std::mt19937_64 gen(1);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(gen() % 300, '\0');
    for (char& c : text) c = static_cast<char>(gen() % 256);  // invalid UTF-8 most of the time
    ASSERT_EQ(t.decode(t.encode(text)), text) << "trial " << trial;
  }
  for (const std::string text : {"", " ", "\n\n\n", "   \t \r\n ", "a  b\n\n\nc   "}) {
    EXPECT_EQ(t.decode(t.encode(text)), text);
  }
  EXPECT_EQ(t.unk_id(), -1);
}

TEST(BpeTokenizer, CharacterModeRoundTripsTheCorpusCharacters) {
  const std::string corpus =
      "na\xC3\xAFve caf\xC3\xA9 \xE2\x82\xAC"
      "5, \xF0\x9F\x98\x80 \n" +
      shakespeare_excerpt().substr(0, 50000);
  const BpeTokenizer t = BpeTokenizer::train(corpus, options(300, false));
  // Random text drawn from the corpus's characters, spaces and newlines included.
  std::vector<std::string> chars;
  for (size_t i = 0; i < corpus.size();) {
    size_t n = 1;
    while (i + n < corpus.size() && (static_cast<unsigned char>(corpus[i + n]) & 0xC0) == 0x80) ++n;
    chars.push_back(corpus.substr(i, n));
    i += n;
  }
  std::mt19937_64 gen(2);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    for (size_t k = gen() % 100; k > 0; --k) text += chars[gen() % chars.size()];
    ASSERT_EQ(t.decode(t.encode(text)), text) << "trial " << trial;
  }
  EXPECT_EQ(t.decode(t.encode("")), "");
  // A character the corpus never had is <unk>.
  const std::vector<int64_t> ids = t.encode("\xE4\xB8\xAD");  // 中
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], t.unk_id());
  EXPECT_EQ(t.id_to_token(t.unk_id()), "<unk>");
}

TEST(BpeTokenizer, TrainingIsDeterministicAcrossRunsAndThreadCounts) {
  const std::string corpus = shakespeare_excerpt();
  set_num_threads(1);
  const BpeTokenizer one = BpeTokenizer::train(corpus, options(1000, true));
  set_num_threads(2);
  const BpeTokenizer two = BpeTokenizer::train(corpus, options(1000, true));
  const BpeTokenizer again = BpeTokenizer::train(corpus, options(1000, true));
  set_num_threads(0);
  EXPECT_EQ(one.merges(), two.merges());
  EXPECT_EQ(two.merges(), again.merges());
  EXPECT_EQ(one.to_json(), two.to_json());
}

// The naive trainer: every merge recounts every pair of every word, then picks the most
// frequent (ties: smaller left id, then smaller right id) and rewrites every word.
std::vector<std::pair<int64_t, int64_t>> naive_merges(std::string_view corpus,
                                                      const BpeOptions& o) {
  std::map<std::string, int64_t> counts;
  split_words(corpus, [&](std::string_view w) { ++counts[std::string(w)]; });
  std::vector<std::string> alphabet;  // bytes or characters, sorted
  std::map<std::string, int64_t> base;
  int64_t next_id = o.byte_level ? 0 : 1;  // character mode: <unk> is id 0
  if (o.byte_level) {
    for (int b = 0; b < 256; ++b) base[std::string(1, static_cast<char>(b))] = next_id++;
  }
  auto pieces = [&](const std::string& w) {
    std::vector<std::string> out;
    for (size_t i = 0; i < w.size();) {
      size_t n = 1;
      if (!o.byte_level) {
        while (i + n < w.size() && (static_cast<unsigned char>(w[i + n]) & 0xC0) == 0x80) ++n;
      }
      out.push_back(w.substr(i, n));
      i += n;
    }
    return out;
  };
  if (!o.byte_level) {
    std::vector<std::string> all;
    for (const auto& [w, n] : counts)
      for (const auto& p : pieces(w)) all.push_back(p);
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (const auto& c : all) base[c] = next_id++;
  }
  std::vector<std::pair<std::vector<int64_t>, int64_t>> words;
  for (const auto& [w, n] : counts) {
    std::vector<int64_t> s;
    for (const auto& p : pieces(w)) s.push_back(base.at(p));
    words.emplace_back(s, n);
  }
  std::vector<std::pair<int64_t, int64_t>> merges;
  while (next_id < o.vocab_size) {
    std::map<std::pair<int64_t, int64_t>, int64_t> pairs;  // ordered: ties by (left, right)
    for (const auto& [s, n] : words)
      for (size_t i = 0; i + 1 < s.size(); ++i) pairs[{s[i], s[i + 1]}] += n;
    std::pair<int64_t, int64_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [p, n] : pairs) {
      if (n > best_count) {
        best = p;
        best_count = n;
      }
    }
    if (best_count < o.min_frequency) break;
    merges.push_back(best);
    for (auto& [s, n] : words) {
      std::vector<int64_t> r;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) {
          r.push_back(next_id);
          ++i;
        } else {
          r.push_back(s[i]);
        }
      }
      s = r;
    }
    ++next_id;
  }
  return merges;
}

TEST(BpeTokenizer, FastTrainerMakesTheNaiveTrainersMerges) {
  const std::string corpora[] = {
      kTutorialCorpus,
      shakespeare_excerpt().substr(100000, 60000),
      std::string(500, 'a') + " " + std::string(301, 'a') + " aaa ab ab ba",  // overlapping pairs
      "z\xC3\xBC"
      "rich Z\xC3\xBC"
      "rich z\xC3\xBC"
      "ge \xC3\xBC"
      "ber \xC3\xBC"
      "ber \xC3\xBC"
      "ber",
      "1234 1234 12 34 3412\n\n\n  \t x x x y",
  };
  for (const std::string& corpus : corpora) {
    for (bool byte_level : {false, true}) {
      for (int64_t min_frequency : {1, 2, 3}) {
        const BpeOptions o = options(byte_level ? 256 + 120 : 120, byte_level, min_frequency);
        const BpeTokenizer t = BpeTokenizer::train(corpus, o);
        EXPECT_EQ(t.merges(), naive_merges(corpus, o))
            << "corpus of " << corpus.size() << " bytes, byte_level " << byte_level
            << ", min_frequency " << min_frequency;
      }
    }
  }
}

// It used to loop forever: the empty special matched at the same place again and again.
TEST(BpeTokenizer, AnEmptySpecialTokenIsRefusedAtOnce) {
  BpeOptions o;
  o.vocab_size = 300;
  o.byte_level = true;
  o.special_tokens = {"<|end|>", ""};
  EXPECT_TRUE(testing::ThrowsWith([&] { BpeTokenizer::train("some text to learn from", o); },
                                  "train_bpe: a special token must not be empty"));
}

TEST(BpeTokenizer, SpecialTokensAreNeverSplit) {
  BpeOptions o = options(400, true);
  o.special_tokens = {"<|endoftext|>", "<|pad|>"};
  const std::string corpus = shakespeare_excerpt().substr(0, 40000) + "<|endoftext|>" +
                             shakespeare_excerpt().substr(40000, 40000);
  const BpeTokenizer t = BpeTokenizer::train(corpus, o);
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), 0);
  EXPECT_EQ(t.token_to_id("<|pad|>"), 1);
  const std::vector<int64_t> ids = t.encode("Hello<|endoftext|> world<|pad|><|pad|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 2);
  EXPECT_EQ(t.decode(ids), "Hello<|endoftext|> world<|pad|><|pad|>");
  // No merged token holds a piece of a special token that training saw cut out.
  for (int64_t id = t.first_merge_id(); id < t.vocab_size(); ++id) {
    EXPECT_EQ(t.id_to_token(id).find("<|"), std::string::npos) << t.display(id);
  }
}

TEST(BpeTokenizer, ParallelAndBatchEncodingEqualPlainEncoding) {
  BpeOptions o = options(700, true);
  o.special_tokens = {"<|endoftext|>"};
  const BpeTokenizer t = BpeTokenizer::train(shakespeare_excerpt().substr(0, 200000), o);
  const std::string text =
      shakespeare_excerpt() + "<|endoftext|>" + shakespeare_excerpt().substr(0, 5000);
  set_num_threads(2);
  EXPECT_EQ(t.encode_parallel(text), t.encode(text));
  const std::vector<std::string> texts = {"", "First Citizen:", text.substr(1000, 7000), " x  "};
  const auto batch = t.encode_batch(texts);
  set_num_threads(0);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], t.encode(texts[i]));
}

TEST(BpeTokenizer, RejectsBadOptions) {
  EXPECT_TRUE(
      ThrowsWith([] { BpeTokenizer::train("abc abc", options(3, false)); },
                 "vocab_size (3) is smaller than the special tokens and the base alphabet (5)"));
  EXPECT_TRUE(ThrowsWith([] { BpeTokenizer::train("abc", options(300, true, 0)); },
                         "min_frequency must be >= 1"));
  EXPECT_TRUE(ThrowsWith([] { BpeTokenizer::train("", options(300, false)); },
                         "the corpus has no characters to learn"));
  EXPECT_EQ(BpeTokenizer::train("", options(300, true)).vocab_size(), 256);
  EXPECT_TRUE(ThrowsWith([] { BpeTokenizer::train("ab\xFF", options(300, false)); },
                         "character mode needs UTF-8 text, and in the corpus byte 2 (0xff) "
                         "starts no UTF-8 character; byte_level"));
  BpeOptions o = options(300, true);
  o.special_tokens = {"<s>", "<s>"};
  EXPECT_TRUE(ThrowsWith([&] { BpeTokenizer::train("abc", o); }, "given twice"));
  const BpeTokenizer t = BpeTokenizer::train("abc abc", options(300, true));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        t.decode(std::vector<int64_t>{5, 9999});
      },
      "token id 9999 outside"));
}

// ---------------------------------------------------------------------------------------
// The file format.

BpeTokenizer small_tokenizer() {
  BpeOptions o = options(60, false);
  o.special_tokens = {"<|endoftext|>"};
  return BpeTokenizer::train(kTutorialCorpus, o);
}

class BpeFileTest : public testing::TempDirTest {};

TEST_F(BpeFileTest, SaveAndLoadGiveTheSameTokenizer) {
  for (bool byte_level : {false, true}) {
    BpeOptions o = options(byte_level ? 700 : 300, byte_level);
    o.special_tokens = {"<|endoftext|>"};
    const BpeTokenizer t = BpeTokenizer::train(shakespeare_excerpt().substr(0, 100000), o);
    const std::string path = this->path("tok.json");
    t.save(path);
    const BpeTokenizer back = BpeTokenizer::load(path);
    EXPECT_EQ(back.merges(), t.merges());
    EXPECT_EQ(back.vocab_size(), t.vocab_size());
    EXPECT_EQ(back.to_json(), t.to_json());
    const std::string text = shakespeare_excerpt().substr(200000, 20000);
    EXPECT_EQ(back.encode(text), t.encode(text));
  }
}

// Edits the valid file's JSON text and expects load to fail naming the problem.
void ExpectBroken(const std::string& json, const std::string& message) {
  EXPECT_TRUE(ThrowsWith([&] { BpeTokenizer::from_json(json); }, message)) << json.substr(0, 200);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(BpeFile, BrokenFilesFailClearly) {
  const std::string good = small_tokenizer().to_json();
  ASSERT_NO_THROW(BpeTokenizer::from_json(good));
  ExpectBroken(good.substr(0, good.size() / 2), "not a JSON document");
  ExpectBroken("", "not a JSON document");
  ExpectBroken("[1, 2]", "must be a JSON object");
  ExpectBroken(replace(good, "\"version\": 1", "\"version\": 7"), "unsupported version 7");
  ExpectBroken(replace(good, "\"version\": 1", "\"version\": \"1\""),
               "\"version\" must be an integer");
  ExpectBroken(replace(good, "\"format\": \"attn-bpe\"", "\"format\": \"gpt2\""),
               "\"format\" must be");
  ExpectBroken(replace(good, "\"vocab_size\": 60", "\"vocab_size\": 99999999999"), "out of range");
  ExpectBroken(replace(good, "\"vocab_size\": 60", "\"vocab_size\": 99999999999999999999999"),
               "must be an integer");
  ExpectBroken(replace(good, "\"min_frequency\": 2", "\"min_frequency\": 0"), "out of range");
  ExpectBroken(replace(good, "\"special_tokens\": [", "\"special_tokens\": [\n  \"<unk>\","),
               "given twice");
  ExpectBroken(replace(good, "\"<|endoftext|>\",\n  \"<unk>\"", "\"<|endoftext|>\""),
               "must list \"<unk>\"");
  ExpectBroken(replace(good, "\"alphabet\": [", "\"alphabet\": [\n  \"ab\","),
               "is not one UTF-8 character");
  ExpectBroken(replace(good, "\"alphabet\": [", "\"alphabet\": [\n  \"a\","),
               "twice in the alphabet");
  ExpectBroken(replace(good, "\"merges\": [", "\"merges\": [\n  [\n   9999,\n   3\n  ],"),
               "out of range");
  ExpectBroken(replace(good, "\"merges\": [", "\"merges\": [\n  [\n   0,\n   3\n  ],"),
               "out of range");  // a special
  ExpectBroken(replace(good, "\"merges\": [", "\"merges\": [\n  [\n   -5,\n   3\n  ],"),
               "out of range");
  ExpectBroken(replace(good, "\"merges\": [", "\"merges\": [\n  [\n   5\n  ],"),
               "must be a [left, right] id pair");
  ExpectBroken(replace(good, "\"merges\": [", "\"merges\": [\n  [\n   5.5,\n   3\n  ],"),
               "must be an integer");
  ExpectBroken(replace(good, "\"vocab\": [\n  \"<|endoftext|>\"", "\"vocab\": [\n  \"<|start|>\""),
               "vocab entry 0 disagrees");
  ExpectBroken(replace(good, "\"vocab\": [", "\"vocab\": [\n  \"x\","), "\"vocab\" lists");
  ExpectBroken(replace(good, "\"byte_level\": false", "\"byte_level\": 0"),
               "must be true or false");
  ExpectBroken(replace(good, "\"merges\"", "\"merged\""), "missing field \"merges\"");
  // Shapes the file reader sees without a document tree: {text to replace, replacement, message}.
  ExpectBroken("5", "must be a JSON object");
  const std::vector<std::array<std::string, 3>> shapes = {
      {"\"merges\": [", "\"merges\": {\"a\": [1, 2]}, \"unused\": [",
       "\"merges\" must be an array"},
      {"\"merges\": [", "\"merges\": [\n  [\n   5,\n   3,\n   4\n  ],",
       "merge 0 must be a [left, right] id pair"},
      {"\"merges\": [", "\"merges\": [\n  {\"l\": 5},", "merge 0 must be a [left, right] id pair"},
      {"\"merges\": [", "\"merges\": [\n  [\n   \"5\",\n   3\n  ],",
       "merge 0's ids must be an integer"},
      {"\"merges\": [", "\"merges\": [\n  [\n   [5],\n   3\n  ],",
       "merge 0's ids must be an integer"},
      {"\"vocab\": [", "\"vocab\": {}, \"unused\": [", "\"vocab\" must be an array of strings"},
      {"\"vocab\": [", "\"vocab\": [\n  5,", "\"vocab\" must hold strings only"},
      {"\"vocab\": [", "\"vocab\": [\n  [\"x\"],", "\"vocab\" must hold strings only"},
      {"\"version\": 1", "\"version\": 1.0", "\"version\" must be an integer"},
      {"\"version\": 1", "\"version\": 18446744073709551615", "out of range"},
  };
  for (const auto& [from, to, message] : shapes) ExpectBroken(replace(good, from, to), message);
}

// The reader stops at the first top-level array item past the vocabulary limit instead of
// keeping them all for a check afterwards (20 million merges: 1.8 GB, now 0.6 GB).
TEST(BpeFile, MoreMergesThanAnyVocabularyStopTheReader) {
  std::string text = R"({"format": "attn-bpe", "version": 1, "merges": [)";
  for (int64_t i = 0; i <= (int64_t{1} << 24); ++i) text += "0,";
  text += "0]}";
  EXPECT_TRUE(ThrowsWith([&] { BpeTokenizer::from_json(text); },
                         "a top-level array holds more than 16777216 items"));
}

TEST(BpeFile, LoadingAMissingFileFails) {
  EXPECT_TRUE(ThrowsWith([] { BpeTokenizer::load("/nonexistent/tok.json"); },
                         "/nonexistent/tok.json: cannot open"));
}

TEST(BpeFile, RandomMutationsOfAValidFileNeverCrash) {
  const std::string good = small_tokenizer().to_json();
  std::mt19937_64 gen(3);
  const char alphabet[] = "0123456789[]{}\",:-. eE\\u";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int loaded = 0, rejected = 0;
  for (int trial = 0; trial < 3000 && std::chrono::steady_clock::now() < deadline; ++trial) {
    std::string mutated = good;
    for (int edits = 1 + static_cast<int>(gen() % 4); edits > 0; --edits) {
      const size_t at = gen() % mutated.size();
      switch (gen() % 3) {
        case 0:
          mutated[at] = alphabet[gen() % (sizeof(alphabet) - 1)];
          break;
        case 1:
          mutated.erase(at, 1 + gen() % 8);
          break;
        default:
          mutated.insert(at, 1, alphabet[gen() % (sizeof(alphabet) - 1)]);
          break;
      }
      if (mutated.empty()) mutated.assign(1, '{');  // not = "{": GCC 12 warns falsely (-Wrestrict)
    }
    try {
      const BpeTokenizer t = BpeTokenizer::from_json(mutated);
      t.decode(t.encode("the quick brown fox"));  // whatever loaded must work
      ++loaded;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  RecordProperty("loaded", loaded);
}

// ---------------------------------------------------------------------------------------

TEST(CharTokenizer, OneIdPerCharacterInCodePointOrder) {
  const CharTokenizer t = CharTokenizer::train("hello w\xC3\xB6rld\n");
  EXPECT_EQ(t.characters(),
            (std::vector<std::string>{"\n", " ", "d", "e", "h", "l", "o", "r", "w", "\xC3\xB6"}));
  const std::vector<int64_t> ids = t.encode("w\xC3\xB6rld hello");
  EXPECT_EQ(ids.size(), 11u);
  EXPECT_EQ(t.decode(ids), "w\xC3\xB6rld hello");
  EXPECT_TRUE(ThrowsWith([&] { t.encode("hex"); },
                         "character \"x\" (byte offset 2) is not in the vocabulary"));
  EXPECT_TRUE(ThrowsWith([&] { t.decode(std::vector<int64_t>{10}); }, "id 10 outside [0, 10)"));
  EXPECT_TRUE(ThrowsWith([] { CharTokenizer::train(""); }, "the corpus is empty"));
  EXPECT_TRUE(ThrowsWith([] { CharTokenizer::from_characters({"a", "a"}); }, "given twice"));
  // Not UTF-8: the message says where (an ö cut after its first byte, then a lone 0xff).
  EXPECT_TRUE(ThrowsWith([] { CharTokenizer::train("w\xC3\xB6rld w\xC3"); },
                         "byte 8 (0xc3) starts no UTF-8 character"));
  EXPECT_TRUE(ThrowsWith([] { CharTokenizer::train("ok\xFFok"); },
                         "the corpus is not UTF-8 text: byte 2 (0xff)"));
}

// Tokens as people see them (labels of the attention pictures), for either kind.
TEST(Tokenizer, DisplaysTokensOfEitherKind) {
  const Tokenizer chars = CharTokenizer::train("a b\n\xC3\xB6");
  EXPECT_EQ(chars.display(0), "\u21B5");  // the newline
  EXPECT_EQ(chars.display(1), "\u2581");  // the space
  EXPECT_EQ(chars.display(4), "\xC3\xB6");
  EXPECT_TRUE(ThrowsWith([&] { chars.display(5); }, "outside [0, 5)"));
  BpeOptions o;
  o.vocab_size = 260;
  o.byte_level = true;
  const Tokenizer bytes = BpeTokenizer::train("a b a b", o);
  const std::vector<int64_t> ids = bytes.encode(" b");
  EXPECT_EQ(bytes.display(ids.front()), bytes.bpe()->display(ids.front()));
  EXPECT_EQ(bytes.display(ids.front()).substr(0, 2), "\xC4\xA0");  // GPT-2's "Ġ" for a space
}

// Generation without a prompt starts from a newline, or from the first token when the
// vocabulary cannot spell one.
TEST(Tokenizer, DefaultPromptIsANewlineOrTheFirstToken) {
  // Ids in code point order: '\t' 0, '\n' 1, 'b' 2.
  EXPECT_EQ(Tokenizer(CharTokenizer::train("b\t\n")).default_prompt(), (std::vector<int64_t>{1}));
  const Tokenizer one_line = CharTokenizer::train("ba");
  EXPECT_TRUE(ThrowsWith([&] { one_line.encode("\n"); }, ""));
  EXPECT_EQ(one_line.default_prompt(), (std::vector<int64_t>{0}));
  BpeOptions o;
  o.vocab_size = 260;
  o.byte_level = true;
  const Tokenizer bytes = BpeTokenizer::train("a b\na b", o);
  EXPECT_EQ(bytes.default_prompt(), bytes.encode("\n"));
  EXPECT_EQ(bytes.default_prompt(), (std::vector<int64_t>{10}));  // the byte 0x0A
}

}  // namespace
}  // namespace attn
