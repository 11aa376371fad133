// CharTokenizer: one id per distinct UTF-8 character of the corpus, in code point order.
#include <algorithm>
#include <set>
#include <string_view>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"

namespace attn {

CharTokenizer CharTokenizer::train(std::string_view corpus) {
  const std::string where = detail::first_non_utf8(corpus);
  ATTN_CHECK(where.empty(), "CharTokenizer: the corpus is not UTF-8 text: ", where,
             "; a byte-level BPE tokenizer takes any bytes (attn train --tokenizer bpe)");
  // Distinct characters only: one string per character of a 1 MB corpus took 36 MB.
  std::set<std::string_view> distinct;
  for (size_t i = 0; i < corpus.size();) {
    const size_t length = detail::utf8_length(corpus, i);
    distinct.insert(corpus.substr(i, length));
    i += length;
  }
  // std::set orders by bytes: UTF-8 byte order = code point order.
  std::vector<std::string> characters(distinct.begin(), distinct.end());
  ATTN_CHECK(!characters.empty(), "CharTokenizer: the corpus is empty");
  return from_characters(std::move(characters));
}

CharTokenizer CharTokenizer::from_characters(std::vector<std::string> characters) {
  CharTokenizer t;
  for (const std::string& c : characters) {
    ATTN_CHECK(!c.empty() && detail::is_utf8(c) && detail::utf8_length(c, 0) == c.size(),
               "CharTokenizer: \"", c, "\" is not one UTF-8 character");
    ATTN_CHECK(t.ids_.emplace(c, static_cast<int64_t>(t.ids_.size())).second,
               "CharTokenizer: character \"", c, "\" given twice");
  }
  t.characters_ = std::move(characters);
  return t;
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = detail::utf8_length(text, i);
    const auto it = ids_.find(std::string(text.substr(i, length)));
    const std::string_view c = text.substr(i, length);
    ATTN_CHECK(it != ids_.end(), "CharTokenizer: character \"",
               c == "\n" ? "\\n" : (c == "\t" ? "\\t" : c), "\" (byte offset ", i,
               ") is not in the vocabulary");
    ids.push_back(it->second);
    i += length;
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  for (int64_t id : ids) {
    ATTN_CHECK(id >= 0 && id < vocab_size(), "CharTokenizer: id ", id, " outside [0, ",
               vocab_size(), ")");
    text += characters_[static_cast<size_t>(id)];
  }
  return text;
}

}  // namespace attn
