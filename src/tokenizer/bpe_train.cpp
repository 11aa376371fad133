// BPE training without rescanning the corpus per merge:
//   1. cut the corpus into words and count each distinct word (both cores, on halves cut at
//      word boundaries), then list the distinct words in byte order, as base-token sequences;
//   2. count every adjacent pair once, weighted by word counts, and note for each pair the
//      words it occurs in;
//   3. repeat: take the best pair from a priority queue (entries whose count has since
//      changed are stale and skipped), rewrite only the words that hold it, and apply the
//      changes of their pair counts — each changed pair re-enters the queue with its new count.
// A merge touches the few words that contain its pair instead of the whole corpus: on
// tinyshakespeare that is the difference between seconds and tens of milliseconds.
#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"

namespace attn {
namespace {

struct Word {
  std::vector<int64_t> symbols;
  int64_t count;
};

// A queue entry: most frequent first, then the smaller left id, then the smaller right id.
struct Candidate {
  int64_t count, left, right;
  bool operator<(const Candidate& o) const {  // "lower priority than"
    if (count != o.count) return count < o.count;
    if (left != o.left) return left > o.left;
    return right > o.right;
  }
};

// The distinct words of the corpus (special tokens cut out) with their counts, in byte order.
std::vector<std::pair<std::string, int64_t>> count_words(std::string_view corpus,
                                                         const std::vector<std::string>& specials) {
  std::vector<std::string_view> pieces;
  detail::split_on_specials(corpus, specials, [&](std::string_view piece, int64_t special) {
    if (special < 0) pieces.push_back(piece);
  });
  // Halves (or one piece per thread) cut where a word starts, so each is split independently.
  std::vector<std::string_view> parts;
  for (std::string_view piece : pieces) {
    for (std::string_view part :
         detail::cut_into_parts(piece, static_cast<size_t>(num_threads()), {})) {
      parts.push_back(part);
    }
  }
  std::vector<std::unordered_map<std::string_view, int64_t>> counts(parts.size());
  parallel_for(static_cast<int64_t>(parts.size()), [&](int64_t p) {
    auto& local = counts[static_cast<size_t>(p)];
    split_words(parts[static_cast<size_t>(p)], [&](std::string_view w) { ++local[w]; });
  });
  std::unordered_map<std::string_view, int64_t> total;
  for (const auto& local : counts) {
    for (const auto& [w, n] : local) total[w] += n;
  }
  std::vector<std::pair<std::string, int64_t>> words;
  words.reserve(total.size());
  for (const auto& [w, n] : total) words.emplace_back(std::string(w), n);
  std::sort(words.begin(), words.end());
  return words;
}

uint64_t key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

// The merge loop over the words' symbol sequences (steps 2 and 3 above).
class Merger {
 public:
  Merger(std::vector<Word> words, int64_t min_frequency)
      : words_(std::move(words)), min_frequency_(min_frequency), stamp_(words_.size(), -1) {
    for (size_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w].symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = key(s[i], s[i + 1]);
        counts_[k] += words_[w].count;
        where_[k].push_back(static_cast<int32_t>(w));
      }
    }
    for (const auto& [k, n] : counts_)
      queue_.push({n, static_cast<int64_t>(k >> 32), static_cast<int64_t>(k & 0xFFFFFFFF)});
  }

  // The next pair to merge, or false when none occurs min_frequency times.
  bool best(int64_t& left, int64_t& right) {
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      const auto it = counts_.find(key(c.left, c.right));
      if (it == counts_.end() || it->second != c.count) continue;  // stale entry
      if (c.count < min_frequency_) return false;
      left = c.left;
      right = c.right;
      return true;
    }
    return false;
  }

  // Rewrites every word holding (left, right) with `merged`, and updates the pair counts.
  void merge(int64_t left, int64_t right, int64_t merged, int64_t merge_index) {
    std::unordered_map<uint64_t, int64_t> delta;
    const std::vector<int32_t> holders = std::move(where_[key(left, right)]);
    where_.erase(key(left, right));
    for (int32_t w : holders) {
      if (stamp_[static_cast<size_t>(w)] == merge_index) continue;  // listed twice
      stamp_[static_cast<size_t>(w)] = merge_index;
      Word& word = words_[static_cast<size_t>(w)];
      std::vector<int64_t>& s = word.symbols;
      std::vector<int64_t> rewritten;
      rewritten.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          rewritten.push_back(merged);
          ++i;
        } else {
          rewritten.push_back(s[i]);
        }
      }
      if (rewritten.size() == s.size()) continue;  // a stale listing: the pair is gone
      for (size_t i = 0; i + 1 < s.size(); ++i) delta[key(s[i], s[i + 1])] -= word.count;
      for (size_t i = 0; i + 1 < rewritten.size(); ++i) {
        const uint64_t k = key(rewritten[i], rewritten[i + 1]);
        delta[k] += word.count;
        if (rewritten[i] == merged || rewritten[i + 1] == merged) where_[k].push_back(w);
      }
      s = std::move(rewritten);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& n = counts_[k];
      n += d;
      if (n <= 0) {
        counts_.erase(k);
      } else {
        queue_.push({n, static_cast<int64_t>(k >> 32), static_cast<int64_t>(k & 0xFFFFFFFF)});
      }
    }
  }

 private:
  std::vector<Word> words_;
  int64_t min_frequency_;
  std::vector<int64_t> stamp_;  // the last merge that rewrote each word
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // pair -> words (maybe stale)
  std::priority_queue<Candidate> queue_;
};

}  // namespace

BpeTokenizer BpeTokenizer::train(std::string_view corpus, const BpeOptions& options,
                                 const Progress& progress) {
  ATTN_CHECK(options.min_frequency >= 1, "train_bpe: min_frequency must be >= 1, got ",
             options.min_frequency);
  ATTN_CHECK(options.vocab_size >= 1 && options.vocab_size <= detail::kMaxVocab,
             "train_bpe: vocab_size must be in [1, ", detail::kMaxVocab, "], got ",
             options.vocab_size);
  for (const std::string& special : options.special_tokens) {
    // Checked before the corpus is scanned: an empty special would match everywhere.
    ATTN_CHECK(!special.empty(), "train_bpe: a special token must not be empty");
    ATTN_CHECK(detail::is_utf8(special), "train_bpe: special token \"", special,
               "\" is not UTF-8 text");
  }
  if (!options.byte_level) {
    const std::string where = detail::first_non_utf8(corpus);
    ATTN_CHECK(where.empty(), "train_bpe: character mode needs UTF-8 text, and in the corpus ",
               where, "; byte_level (attn bpe train --byte-level) takes any bytes");
  }
  const std::vector<std::pair<std::string, int64_t>> counted =
      count_words(corpus, options.special_tokens);

  // The base alphabet: the 256 bytes, or the corpus's characters in code point order (UTF-8
  // byte order is code point order).
  std::vector<std::string> alphabet;
  if (!options.byte_level) {
    std::vector<std::string> seen;
    for (const auto& [word, n] : counted) {
      for (size_t i = 0; i < word.size();) {
        const size_t length = detail::utf8_length(word, i);
        seen.push_back(word.substr(i, length));
        i += length;
      }
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    alphabet = std::move(seen);
    // Else every text would encode as <unk>s.
    ATTN_CHECK(!alphabet.empty(),
               "train_bpe: the corpus has no characters to learn (it is empty, or only special "
               "tokens); byte_level starts from the 256 bytes instead");
  }
  BpeTokenizer t = with_base(options, alphabet);
  ATTN_CHECK(t.vocab_size() <= options.vocab_size, "train_bpe: vocab_size (", options.vocab_size,
             ") is smaller than the special tokens and the base alphabet (", t.vocab_size(), ")");

  std::vector<Word> words;
  words.reserve(counted.size());
  for (const auto& [word, n] : counted) {
    Word w{{}, n};
    for (size_t i = 0; i < word.size();) {
      if (options.byte_level) {
        w.symbols.push_back(t.first_base_id_ + static_cast<unsigned char>(word[i++]));
        continue;
      }
      const size_t length = detail::utf8_length(word, i);
      w.symbols.push_back(t.base_ids_.at(word.substr(i, length)));
      i += length;
    }
    words.push_back(std::move(w));
  }

  Merger merger(std::move(words), options.min_frequency);
  const int64_t total = options.vocab_size - t.vocab_size();
  for (int64_t done = 0; done < total; ++done) {
    if (progress && done % 64 == 0) progress(done, total);
    int64_t left = 0, right = 0;
    if (!merger.best(left, right)) break;
    const int64_t merged = t.vocab_size();
    t.add_merge(left, right);
    merger.merge(left, right, merged, done);
  }
  if (progress) progress(t.vocab_size() - t.first_merge_id_, total);
  return t;
}

}  // namespace attn
