// The word-split cache behind BPE encoding: a word seen again gives back exactly the ids its
// split gave, without splitting again; 2-byte and 4-byte ids; its limits (words, arena bytes,
// long words) keep memory bounded without ever changing an id.
#include "src/tokenizer/word_split_cache.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace attn::detail {
namespace {

// A split that derives ids from the word (so a wrong cache hit shows) and counts its calls.
struct CountingSplit {
  int64_t id_limit;
  size_t ids_per_word = 0;  // 0: one id per byte
  size_t calls = 0;
  void operator()(std::string_view word, std::vector<int64_t>& out) {
    ++calls;
    const size_t n = ids_per_word != 0 ? ids_per_word : word.size();
    uint64_t h = hash_word(word);
    for (size_t k = 0; k < n; ++k) {
      out.push_back(static_cast<int64_t>(h % static_cast<uint64_t>(id_limit)));
      h = h * 6364136223846793005ull + 1442695040888963407ull;
    }
  }
};

std::vector<int64_t> ids_of(WordSplitCache& cache, CountingSplit& split, std::string_view word) {
  std::vector<int64_t> out = {-7};  // ids are appended after what is there
  cache.append(word, out, split);
  EXPECT_EQ(out.front(), -7);
  return {out.begin() + 1, out.end()};
}

std::vector<int64_t> expected_ids(CountingSplit split, std::string_view word) {
  std::vector<int64_t> out;
  split(word, out);
  return out;
}

std::string random_word(std::mt19937& rng, size_t max_length) {
  std::uniform_int_distribution<size_t> length(1, max_length);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string word(length(rng), '\0');
  for (char& c : word) c = static_cast<char>(byte(rng));
  return word;
}

TEST(WordSplitCache, ASecondLookupGivesTheSameIdsWithoutSplitting) {
  for (int64_t id_limit : {int64_t{300}, int64_t{65536}, int64_t{65537}, int64_t{1} << 24}) {
    WordSplitCache cache(1000, id_limit);
    CountingSplit split{id_limit};
    for (std::string_view word : {"the", " quick", " brown", "\n\nfox", "x"}) {
      const auto first = ids_of(cache, split, word);
      const size_t calls = split.calls;
      EXPECT_EQ(first, expected_ids(split, word));
      EXPECT_EQ(ids_of(cache, split, word), first) << word << " with ids < " << id_limit;
      EXPECT_EQ(split.calls, calls) << "a cached word was split again";
    }
    EXPECT_EQ(cache.size(), 5u);
  }
}

TEST(WordSplitCache, IdsAtTheEdgesOfTheirWidthSurvive) {
  // 65535 is the largest 2-byte id; 65536 needs the 4-byte form; 2^24 - 1 the largest id.
  for (auto [id_limit, id] : {std::pair<int64_t, int64_t>{65536, 65535},
                              {65536, 0},
                              {65537, 65536},
                              {int64_t{1} << 24, (int64_t{1} << 24) - 1}}) {
    WordSplitCache cache(10, id_limit);
    auto split = [&](std::string_view, std::vector<int64_t>& out) {
      out.insert(out.end(), {id, 1, id});
    };
    std::vector<int64_t> out;
    cache.append("word", out, split);
    cache.append("word", out,
                 [](std::string_view, std::vector<int64_t>&) { FAIL() << "split again"; });
    EXPECT_EQ(out, (std::vector<int64_t>{id, 1, id, id, 1, id}));
  }
}

TEST(WordSplitCache, ManyWordsStayCorrectAsTheTableGrows) {
  std::mt19937 rng(5);
  WordSplitCache cache(1 << 20, 4096);
  CountingSplit split{4096};
  std::vector<std::string> words;
  for (int i = 0; i < 20000; ++i) words.push_back(random_word(rng, 12));
  for (const auto& w : words) ASSERT_EQ(ids_of(cache, split, w), expected_ids(split, w));
  const size_t calls = split.calls;
  for (const auto& w : words) ASSERT_EQ(ids_of(cache, split, w), expected_ids(split, w));
  EXPECT_EQ(split.calls, calls) << "every word should have been remembered";
  EXPECT_EQ(cache.size(), std::set<std::string>(words.begin(), words.end()).size());
}

TEST(WordSplitCache, PastMaxWordsNewWordsAreSplitEveryTime) {
  WordSplitCache cache(3, 100);
  CountingSplit split{100};
  for (std::string_view w : {"a", "b", "c", "d"}) ids_of(cache, split, w);
  EXPECT_EQ(cache.size(), 3u);
  const size_t calls = split.calls;
  EXPECT_EQ(ids_of(cache, split, "a"), expected_ids(split, "a"));  // remembered
  EXPECT_EQ(split.calls, calls);
  EXPECT_EQ(ids_of(cache, split, "d"), expected_ids(split, "d"));  // not remembered
  EXPECT_EQ(split.calls, calls + 1);
}

TEST(WordSplitCache, LongWordsAndLongSplitsAreNotKeptButStillRight) {
  WordSplitCache cache(100, 1000);
  CountingSplit split{1000};
  const std::string long_word(300, 'w');
  EXPECT_EQ(ids_of(cache, split, long_word), expected_ids(split, long_word));
  EXPECT_EQ(ids_of(cache, split, long_word), expected_ids(split, long_word));
  const std::string longest(255, 'v');  // 255 bytes and 255 ids: the largest entry
  EXPECT_EQ(ids_of(cache, split, longest), expected_ids(split, longest));
  EXPECT_EQ(cache.size(), 1u);
  split.ids_per_word = 256;  // more ids than an entry can count
  EXPECT_EQ(ids_of(cache, split, "short"), expected_ids(split, "short"));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(WordSplitCache, TheArenaStopsAtItsLimit) {
  // The largest entries (255 bytes, 255 four-byte ids) fill the arena after ~3300 words; the
  // ones after are split each time, and every answer stays right.
  std::mt19937 rng(9);
  WordSplitCache cache(1 << 20, 1 << 24);
  CountingSplit split{1 << 24};
  std::vector<std::string> words;
  for (int i = 0; i < 4000; ++i) {
    std::string w = random_word(rng, 1);
    w.resize(255, static_cast<char>('a' + i % 26));
    w.replace(1, 4, std::to_string(1000 + i));  // distinct
    words.push_back(w);
  }
  for (const auto& w : words) ASSERT_EQ(ids_of(cache, split, w), expected_ids(split, w));
  EXPECT_LT(cache.size(), words.size());
  EXPECT_GT(cache.size(), 3000u);
  EXPECT_LE(cache.bytes(), WordSplitCache::kMaxArenaBytes + 1 + 8192 * 4);
  for (const auto& w : words) ASSERT_EQ(ids_of(cache, split, w), expected_ids(split, w));
}

}  // namespace
}  // namespace attn::detail
