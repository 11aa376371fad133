// Encoding text that arrives in parts (BpeStreamEncoder, encode_parallel): the ids equal those
// of a plain reference — special tokens found by brute force, then each word encoded on its
// own — however the text is cut into writes, blocks and threads; ids leave as soon as their
// words are complete; texts with no place to cut, special tokens across every boundary.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;

using testing::shakespeare_excerpt;

// The specials are chosen to overlap and to hold spaces: "<a>" and "a><b" overlap in "<a><b>",
// " <s> " would be cut in two by a cut at its inner space, "<a> <b>" is longer than "<a>".
BpeTokenizer tokenizer_with_specials() {
  BpeOptions o;
  o.vocab_size = 600;
  o.byte_level = true;
  o.special_tokens = {"<a>", "a><b", " <s> ", "<a> <b>"};
  return BpeTokenizer::train(shakespeare_excerpt().substr(0, 60000), o);
}

// Leftmost-longest special tokens by trying every position, then split_words and each word
// encoded alone: the ids any encoding of text must give.
std::vector<int64_t> reference_encode(const BpeTokenizer& t, std::string_view text) {
  const auto& specials = t.options().special_tokens;
  std::vector<int64_t> ids;
  auto plain = [&](std::string_view piece) {
    split_words(piece, [&](std::string_view word) {
      const std::vector<int64_t> w = t.encode(word);
      ids.insert(ids.end(), w.begin(), w.end());
    });
  };
  size_t plain_start = 0;
  for (size_t i = 0; i < text.size();) {
    int64_t best = -1;
    for (size_t s = 0; s < specials.size(); ++s) {
      if (text.substr(i, specials[s].size()) == specials[s] &&
          (best < 0 || specials[s].size() > specials[static_cast<size_t>(best)].size())) {
        best = static_cast<int64_t>(s);
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    plain(text.substr(plain_start, i - plain_start));
    ids.push_back(best);  // specials are ids 0, 1, … in order
    i += specials[static_cast<size_t>(best)].size();
    plain_start = i;
  }
  plain(text.substr(plain_start));
  return ids;
}

// Random text from pieces that make boundaries interesting: words, runs of spaces and
// newlines, every special, fragments of specials, digits, bytes ≥ 0x80.
std::string random_text(std::mt19937& gen, size_t pieces) {
  const std::vector<std::string> parts = {
      "the",     " ",  "  ", "\n", "\n\n", "King", "<a>",  "a><b", " <s> ",
      "<a> <b>", "<a", "b>", "<",  ">",    "a",    " <s>", "123",  "\xc3\xa9t\xc3\xa9",
      ",",       "'s", "\t"};
  std::string text;
  for (size_t i = 0; i < pieces; ++i) text += parts[gen() % parts.size()];
  return text;
}

// Feeds text to a stream encoder in writes of random sizes; returns every id emitted.
std::vector<int64_t> stream_encode(const BpeTokenizer& t, std::string_view text, std::mt19937& gen,
                                   size_t block_bytes, size_t cache_words, size_t max_write) {
  std::vector<int64_t> ids;
  BpeStreamEncoder encoder(
      t, [&](std::span<const int64_t> part) { ids.insert(ids.end(), part.begin(), part.end()); },
      block_bytes, cache_words);
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min(text.size() - at, 1 + gen() % max_write);
    encoder.write(text.substr(at, n));
    at += n;
  }
  encoder.finish();
  return ids;
}

TEST(BpeStream, TheReferenceAgreesWithEncode) {
  const BpeTokenizer t = tokenizer_with_specials();
  std::mt19937 gen(1);
  for (int trial = 0; trial < 20; ++trial) {
    const std::string text = random_text(gen, 300);
    ASSERT_EQ(t.encode(text), reference_encode(t, text)) << text;
  }
  EXPECT_EQ(t.encode(shakespeare_excerpt()), reference_encode(t, shakespeare_excerpt()));
}

TEST(BpeStream, AnyCutIntoWritesBlocksAndThreadsGivesTheSameIds) {
  const BpeTokenizer t = tokenizer_with_specials();
  std::mt19937 gen(2);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int trial = 0; trial < 40; ++trial) {
      const std::string text = random_text(gen, 50 + gen() % 3000);
      const std::vector<int64_t> expected = reference_encode(t, text);
      const size_t block =
          std::vector<size_t>{1, 3, 7, 64, 1000, BpeStreamEncoder::kDefaultBlockBytes}[trial % 6];
      const size_t cache = trial % 3 == 0 ? 2 : BpeStreamEncoder::kDefaultCacheWords;
      const size_t max_write = std::vector<size_t>{1, 5, 100, 100000}[trial % 4];
      ASSERT_EQ(stream_encode(t, text, gen, block, cache, max_write), expected)
          << "threads " << threads << " block " << block << " cache " << cache << " writes ≤ "
          << max_write << "\n"
          << text;
    }
    // A long real text over blocks big enough for the threads to split.
    const std::string text =
        shakespeare_excerpt() + "<a> <b>" + shakespeare_excerpt().substr(0, 70000);
    EXPECT_EQ(stream_encode(t, text, gen, 20000, BpeStreamEncoder::kDefaultCacheWords, 70000),
              reference_encode(t, text));
    EXPECT_EQ(t.encode_parallel(text), reference_encode(t, text));
  }
  set_num_threads(0);
}

TEST(BpeStream, IdsLeaveAsSoonAsTheirWordsAreComplete) {
  const BpeTokenizer t = tokenizer_with_specials();
  const std::string text = shakespeare_excerpt();
  size_t emitted = 0;
  BpeStreamEncoder encoder(
      t, [&](std::span<const int64_t> ids) { emitted += ids.size(); }, 4096);
  for (size_t at = 0; at < text.size(); at += 1000)
    encoder.write(std::string_view(text).substr(at, 1000));
  const size_t before_finish = emitted;
  encoder.finish();
  // Held back: at most a block per thread and the last write (an id has at least one byte).
  EXPECT_GT(before_finish, 0u);
  EXPECT_LE(emitted - before_finish, 4096u * static_cast<size_t>(num_threads()) + 1000u);
  EXPECT_EQ(emitted, t.encode(text).size());
  // The encoder starts again on a new text after finish.
  std::vector<int64_t> again;
  BpeStreamEncoder second(
      t, [&](std::span<const int64_t> ids) { again.insert(again.end(), ids.begin(), ids.end()); });
  for (const char* piece : {"First Citizen:\nBefore we", " proceed any further, hear me speak."})
    second.write(piece);
  second.finish();
  second.write("<a> again");
  second.finish();
  std::vector<int64_t> expected =
      t.encode("First Citizen:\nBefore we proceed any further, hear me speak.");
  const std::vector<int64_t> tail = t.encode("<a> again");
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(again, expected);
}

TEST(BpeStream, TextWithoutAPlaceToCutIsHeldUntilTheEnd) {
  const BpeTokenizer t = tokenizer_with_specials();
  // 300 KB of letters: no word starts, so nothing can be emitted before finish. Written 1 KB
  // at a time with 1 KB blocks, the encoder must not rescan the held text at every write.
  const std::string letters(300000, 'e');
  std::vector<int64_t> ids;
  BpeStreamEncoder encoder(
      t, [&](std::span<const int64_t> part) { ids.insert(ids.end(), part.begin(), part.end()); },
      1024);
  for (size_t at = 0; at < letters.size(); at += 1024)
    encoder.write(std::string_view(letters).substr(at, 1024));
  EXPECT_TRUE(ids.empty());
  encoder.write(" and then words");
  encoder.finish();
  EXPECT_EQ(ids, t.encode(letters + " and then words"));
}

TEST(BpeStream, FindCutNeverChangesTheIds) {
  const BpeTokenizer t = tokenizer_with_specials();
  const auto& specials = t.options().special_tokens;
  std::mt19937 gen(3);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_text(gen, 1 + gen() % 60);
    const size_t limit = gen() % (text.size() + 2);
    const size_t cut = detail::find_cut(text, limit, specials);
    if (cut == 0) continue;
    ASSERT_LT(cut, text.size());
    std::vector<int64_t> two = reference_encode(t, std::string_view(text).substr(0, cut));
    const std::vector<int64_t> rest = reference_encode(t, std::string_view(text).substr(cut));
    two.insert(two.end(), rest.begin(), rest.end());
    ASSERT_EQ(two, reference_encode(t, text)) << "cut " << cut << " of \"" << text << "\"";
  }
  // The last cut at or before the limit; the first after it when there is none before.
  EXPECT_EQ(detail::find_cut("ab cd ef gh", 7, {}), 5u);
  EXPECT_EQ(detail::find_cut("abcdefgh ij kl", 3, {}), 8u);
  EXPECT_EQ(detail::find_cut("abcdefgh", 3, {}), 0u);
  // Never inside the special token the scan picks: before it, or after it at the start.
  EXPECT_EQ(detail::find_cut("xy <s> zz zz", 6, {" <s> "}), 2u);
  EXPECT_EQ(detail::find_cut(" <s> zz zz", 3, {" <s> "}), 5u);
}

TEST(BpeStream, CutIntoPartsKeepsEveryByteAndTheIds) {
  const BpeTokenizer t = tokenizer_with_specials();
  const auto& specials = t.options().special_tokens;
  std::mt19937 gen(4);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = random_text(gen, 1 + gen() % 200);
    const size_t parts = 1 + gen() % 5;
    const auto pieces = detail::cut_into_parts(text, parts, specials);
    ASSERT_GE(pieces.size(), 1u);
    ASSERT_LE(pieces.size(), parts);
    std::string joined;
    std::vector<int64_t> ids;
    for (std::string_view piece : pieces) {
      joined += piece;
      const std::vector<int64_t> piece_ids = reference_encode(t, piece);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    }
    ASSERT_EQ(joined, text);
    ASSERT_EQ(ids, reference_encode(t, text)) << parts << " parts of \"" << text << "\"";
  }
  // About equal parts, each cut where a word starts.
  const auto halves = detail::cut_into_parts("aa bb cc dd", 2, {});
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0], "aa bb");
  EXPECT_EQ(halves[1], " cc dd");
  EXPECT_EQ(detail::cut_into_parts("abcdef", 3, {}).size(), 1u);  // nowhere to cut
}

TEST(BpeStream, RejectsBadArguments) {
  const BpeTokenizer t = tokenizer_with_specials();
  EXPECT_TRUE(
      ThrowsWith([&] { BpeStreamEncoder e(t, nullptr); }, "no function to receive the ids"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        BpeStreamEncoder e(
            t, [](std::span<const int64_t>) {}, 0);
      },
      "block_bytes must be >= 1"));
}

}  // namespace
}  // namespace attn
