// BpeTokenizer: the vocabulary, encoding (the learnt merges applied to each word in the order
// they were learnt) and decoding. Training is in bpe_train.cpp, the file format in bpe_json.cpp.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/bpe_merge.hpp"
#include "src/tokenizer/text.hpp"
#include "src/tokenizer/token_index.hpp"
#include "src/tokenizer/word_split_cache.hpp"

namespace attn {
namespace {

constexpr const char* kUnknown = "<unk>";

}  // namespace

// The lookup tables live behind pointers so that their types stay out of the public header.
BpeTokenizer::BpeTokenizer()
    : ids_(std::make_unique<detail::TokenIndex>()),
      merge_rank_(std::make_unique<detail::PairRanks>()) {}
BpeTokenizer::BpeTokenizer(const BpeTokenizer& other)
    : options_(other.options_),
      tokens_(other.tokens_),
      ids_(std::make_unique<detail::TokenIndex>(*other.ids_)),
      merges_(other.merges_),
      merge_rank_(std::make_unique<detail::PairRanks>(*other.merge_rank_)),
      base_ids_(other.base_ids_),
      first_base_id_(other.first_base_id_),
      first_merge_id_(other.first_merge_id_),
      unk_id_(other.unk_id_) {}
BpeTokenizer& BpeTokenizer::operator=(const BpeTokenizer& other) {
  if (this != &other) *this = BpeTokenizer(other);
  return *this;
}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::with_base(const BpeOptions& options,
                                     const std::vector<std::string>& alphabet) {
  BpeTokenizer t;
  t.options_ = options;
  for (const std::string& special : options.special_tokens) {
    ATTN_CHECK(!special.empty(), "bpe: a special token must not be empty");
    ATTN_CHECK(t.ids_->find(special, t.tokens_) < 0, "bpe: special token \"", special,
               "\" given twice");
    t.add_token(special);
  }
  if (!options.byte_level) {
    if (t.ids_->find(kUnknown, t.tokens_) < 0) {
      t.options_.special_tokens.push_back(kUnknown);
      t.add_token(kUnknown);
    }
    t.unk_id_ = t.ids_->find(kUnknown, t.tokens_);
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
  tokens_.push_back(std::move(bytes));
  ids_->insert(vocab_size() - 1, tokens_);  // keeps the first id if the bytes repeat
}

void BpeTokenizer::add_merge(int64_t left, int64_t right) {
  merge_rank_->insert(left, right, static_cast<int64_t>(merges_.size()));
  merges_.emplace_back(left, right);
  add_token(tokens_[static_cast<size_t>(left)] + tokens_[static_cast<size_t>(right)]);
}

const std::string& BpeTokenizer::id_to_token(int64_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "bpe: token id ", id, " outside [0, ", vocab_size(),
             ")");
  return tokens_[static_cast<size_t>(id)];
}

std::optional<int64_t> BpeTokenizer::token_to_id(std::string_view token) const {
  const int64_t id = ids_->find(token, tokens_);
  if (id < 0) return std::nullopt;
  return id;
}

std::string BpeTokenizer::display(int64_t id) const {
  const std::string& bytes = id_to_token(id);
  std::string shown;
  if (options_.byte_level && id >= first_base_id_) {
    for (unsigned char b : bytes) shown += detail::byte_display(b);
    return shown;
  }
  return detail::display_characters(bytes);
}

// One word: its base tokens, then the learnt merges applied in the order learnt.
void BpeTokenizer::encode_word(std::string_view word, std::vector<int64_t>& out) const {
  thread_local std::vector<int64_t> symbols;  // kept per thread: no allocation per word
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
  detail::apply_merges(symbols, *merge_rank_, merges_,
                       [this](int64_t rank) { return first_merge_id_ + rank; });
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeTokenizer::encode_with(std::string_view text, detail::WordSplitCache& cache,
                               std::vector<int64_t>& out) const {
  auto split = [this](std::string_view word, std::vector<int64_t>& ids) { encode_word(word, ids); };
  detail::split_on_specials(
      text, options_.special_tokens, [&](std::string_view piece, int64_t special) {
        if (special >= 0) {
          out.push_back(special);  // the specials are ids 0, 1, … in their order (with_base)
          return;
        }
        detail::for_each_word(piece,
                              [&](std::string_view word) { cache.append(word, out, split); });
      });
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const {
  detail::WordSplitCache cache(std::numeric_limits<size_t>::max(), vocab_size());
  std::vector<int64_t> ids;
  encode_with(text, cache, ids);
  return ids;
}

std::vector<std::vector<int64_t>> BpeTokenizer::encode_batch(
    const std::vector<std::string>& texts) const {
  std::vector<std::vector<int64_t>> ids(texts.size());
  parallel_for(static_cast<int64_t>(texts.size()), [&](int64_t i) {
    ids[static_cast<size_t>(i)] = encode(texts[static_cast<size_t>(i)]);
  });
  return ids;
}

std::vector<int64_t> BpeTokenizer::encode_parallel(std::string_view text) const {
  std::vector<int64_t> ids;
  BpeStreamEncoder encoder(*this, [&](std::span<const int64_t> part) {
    ids.insert(ids.end(), part.begin(), part.end());
  });
  encoder.write(text);
  encoder.finish();
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  for (int64_t id : ids) text += id_to_token(id);
  return text;
}

}  // namespace attn
