// BpeTokenizer: the vocabulary, encoding (the learnt merges applied to each word in the order
// they were learnt) and decoding. Training is in bpe_train.cpp, the file format in bpe_json.cpp.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"
#include "src/tokenizer/word_table.hpp"

namespace attn {
namespace {

constexpr const char* kUnknown = "<unk>";

uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

}  // namespace

BpeTokenizer BpeTokenizer::with_base(const BpeOptions& options,
                                     const std::vector<std::string>& alphabet) {
  BpeTokenizer t;
  t.options_ = options;
  for (const std::string& special : options.special_tokens) {
    ATTN_CHECK(!special.empty(), "bpe: a special token must not be empty");
    ATTN_CHECK(!t.ids_.contains(special), "bpe: special token \"", special, "\" given twice");
    t.add_token(special);
  }
  if (!options.byte_level) {
    if (!t.ids_.contains(kUnknown)) {
      t.options_.special_tokens.push_back(kUnknown);
      t.add_token(kUnknown);
    }
    t.unk_id_ = t.ids_.at(kUnknown);
  }
  t.first_base_id_ = t.vocab_size();
  if (options.byte_level) {
    for (int b = 0; b < 256; ++b) t.add_token(std::string(1, static_cast<char>(b)));
  } else {
    for (const std::string& c : alphabet) {
      ATTN_CHECK(t.base_ids_.emplace(c, t.vocab_size()).second, "bpe: character \"", c,
                 "\" is twice in the alphabet");
      t.add_token(c);
    }
  }
  t.first_merge_id_ = t.vocab_size();
  return t;
}

void BpeTokenizer::add_token(std::string bytes) {
  const auto id = static_cast<int64_t>(tokens_.size());
  ids_.emplace(bytes, id);  // keeps the first id if the bytes repeat
  tokens_.push_back(std::move(bytes));
}

void BpeTokenizer::add_merge(int64_t left, int64_t right) {
  merge_rank_.emplace(pair_key(left, right), static_cast<int64_t>(merges_.size()));
  merges_.emplace_back(left, right);
  add_token(tokens_[static_cast<size_t>(left)] + tokens_[static_cast<size_t>(right)]);
}

const std::string& BpeTokenizer::id_to_token(int64_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "bpe: token id ", id, " outside [0, ", vocab_size(), ")");
  return tokens_[static_cast<size_t>(id)];
}

std::optional<int64_t> BpeTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::string BpeTokenizer::display(int64_t id) const {
  const std::string& bytes = id_to_token(id);
  std::string shown;
  if (options_.byte_level && id >= first_base_id_) {
    for (unsigned char b : bytes) shown += detail::byte_display(b);
    return shown;
  }
  for (char c : bytes) {
    if (c == ' ') {
      shown += "\u2581";  // ▁
    } else if (c == '\n') {
      shown += "\u21B5";  // ↵
    } else {
      shown += c;
    }
  }
  return shown;
}

// One word: its base tokens, then the learnt merges applied in the order learnt (each time
// the adjacent pair with the earliest merge, every occurrence left to right). Each adjacent
// pair's rank is looked up once and again only when a merge changes one of its two tokens.
void BpeTokenizer::encode_word(std::string_view word, std::vector<int64_t>& out) const {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  // Scratch kept per thread: five fresh vectors per word made malloc a fifth of encoding.
  thread_local std::vector<int64_t> symbols, ranks, next_symbols, next_ranks;
  thread_local std::vector<size_t> from;  // next_symbols[k] came from symbols[from[k]]
  symbols.clear();
  for (size_t i = 0; i < word.size();) {
    if (options_.byte_level) {
      symbols.push_back(first_base_id_ + static_cast<unsigned char>(word[i++]));
      continue;
    }
    const size_t length = detail::utf8_length(word, i);
    const auto it = base_ids_.find(std::string(word.substr(i, length)));
    symbols.push_back(it != base_ids_.end() ? it->second : unk_id_);
    i += length;
  }
  auto rank_of = [&](int64_t left, int64_t right) {
    const auto it = merge_rank_.find(pair_key(left, right));
    return it == merge_rank_.end() ? kNone : it->second;
  };
  ranks.assign(symbols.empty() ? 0 : symbols.size() - 1, kNone);
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = rank_of(symbols[i], symbols[i + 1]);
  for (;;) {
    const auto best = std::min_element(ranks.begin(), ranks.end());
    if (best == ranks.end() || *best == kNone) break;
    const int64_t rank = *best;
    const auto [left, right] = merges_[static_cast<size_t>(rank)];
    const int64_t merged = first_merge_id_ + rank;
    next_symbols.clear();
    from.clear();
    for (size_t i = 0; i < symbols.size(); ++i) {
      from.push_back(i);
      if (i + 1 < symbols.size() && ranks[i] == rank && symbols[i] == left && symbols[i + 1] == right) {
        next_symbols.push_back(merged);
        ++i;
      } else {
        next_symbols.push_back(symbols[i]);
      }
    }
    next_ranks.assign(next_symbols.empty() ? 0 : next_symbols.size() - 1, kNone);
    for (size_t k = 0; k < next_ranks.size(); ++k) {
      const bool unchanged = next_symbols[k] != merged && next_symbols[k + 1] != merged;
      next_ranks[k] = unchanged ? ranks[from[k]] : rank_of(next_symbols[k], next_symbols[k + 1]);
    }
    symbols.swap(next_symbols);
    ranks.swap(next_ranks);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const {
  return encode_pieces(text, 1);
}

std::vector<std::vector<int64_t>> BpeTokenizer::encode_batch(const std::vector<std::string>& texts) const {
  std::vector<std::vector<int64_t>> ids(texts.size());
  parallel_for(static_cast<int64_t>(texts.size()),
               [&](int64_t i) { ids[static_cast<size_t>(i)] = encode(texts[static_cast<size_t>(i)]); });
  return ids;
}

std::vector<int64_t> BpeTokenizer::encode_parallel(std::string_view text) const {
  return encode_pieces(text, 4 * num_threads());
}

// Three parallel passes over pieces cut at word starts: collect each piece's distinct words
// (and each word's index among them); split every distinct word of the text once (the costly
// part: per-piece caches would split each common word once per piece); then write each
// piece's ids in order. Pieces are ~64 KiB, at most max_parts per run of plain text.
std::vector<int64_t> BpeTokenizer::encode_pieces(std::string_view text, int max_parts) const {
  std::vector<std::pair<std::string_view, int64_t>> pieces;  // (text, special id or −1)
  detail::split_on_specials(text, options_.special_tokens, [&](std::string_view piece, int64_t special) {
    if (special >= 0) {
      pieces.emplace_back(piece, ids_.at(std::string(piece)));
      return;
    }
    const int parts = static_cast<int>(std::min<size_t>(static_cast<size_t>(max_parts),
                                                        piece.size() / 65536 + 1));
    for (std::string_view part : detail::cut_at_word_starts(piece, parts)) pieces.emplace_back(part, -1);
  });
  const auto n = static_cast<int64_t>(pieces.size());

  // Pass 1, per piece: its distinct words, and for each word in order its local index.
  struct PieceWords {
    std::vector<std::string_view> distinct;
    std::vector<uint32_t> order;
  };
  std::vector<PieceWords> local(pieces.size());
  parallel_for(n, [&](int64_t p) {
    if (pieces[static_cast<size_t>(p)].second >= 0) return;
    PieceWords& pw = local[static_cast<size_t>(p)];
    detail::WordTable seen;
    detail::for_each_word(pieces[static_cast<size_t>(p)].first, [&](std::string_view w) {
      bool inserted = false;
      const uint32_t at = seen.find_or_insert(w, static_cast<uint32_t>(pw.distinct.size()), inserted);
      if (inserted) pw.distinct.push_back(w);
      pw.order.push_back(at);
    });
  });
  // The distinct words of the whole text, and each piece's local index -> global index.
  detail::WordTable index;
  std::vector<std::string_view> words;
  std::vector<std::vector<uint32_t>> global(pieces.size());
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (std::string_view w : local[p].distinct) {
      bool inserted = false;
      global[p].push_back(index.find_or_insert(w, static_cast<uint32_t>(words.size()), inserted));
      if (inserted) words.push_back(w);
    }
  }
  // Pass 2: split each distinct word once.
  std::vector<std::vector<int64_t>> splits(words.size());
  parallel_for(static_cast<int64_t>(words.size()), [&](int64_t i) {
    encode_word(words[static_cast<size_t>(i)], splits[static_cast<size_t>(i)]);
  });
  // Pass 3, per piece: how many ids it makes; then each piece writes its ids straight into
  // its range of the result (one allocation: fresh pages cost ~11 µs each to fault on this VM,
  // and per-piece vectors concatenated afterwards took a quarter of the encoding time).
  std::vector<size_t> offsets(pieces.size() + 1, 0);
  parallel_for(n, [&](int64_t p) {
    size_t count = 1;  // a special token
    if (pieces[static_cast<size_t>(p)].second < 0) {
      count = 0;
      for (uint32_t local_index : local[static_cast<size_t>(p)].order) {
        count += splits[global[static_cast<size_t>(p)][local_index]].size();
      }
    }
    offsets[static_cast<size_t>(p) + 1] = count;
  });
  for (size_t p = 0; p < pieces.size(); ++p) offsets[p + 1] += offsets[p];
  std::vector<int64_t> ids(offsets.back());
  parallel_for(n, [&](int64_t p) {
    int64_t* out = ids.data() + offsets[static_cast<size_t>(p)];
    if (pieces[static_cast<size_t>(p)].second >= 0) {
      *out = pieces[static_cast<size_t>(p)].second;
      return;
    }
    for (uint32_t local_index : local[static_cast<size_t>(p)].order) {
      const auto& split = splits[global[static_cast<size_t>(p)][local_index]];
      out = std::copy(split.begin(), split.end(), out);
    }
  });
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  for (int64_t id : ids) text += id_to_token(id);
  return text;
}

}  // namespace attn
