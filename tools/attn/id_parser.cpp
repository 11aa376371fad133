// IdParser: whitespace-separated decimal ids, fed in chunks.
#include "id_parser.hpp"

#include <cctype>

#include "attn/error.hpp"

namespace attn::cli {

void IdParser::feed(std::string_view chunk, std::vector<int64_t>& ids) {
  for (const char c : chunk) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      end_token(ids);
    } else {
      if (token_.empty()) token_at_ = offset_;
      token_ += c;
      if (token_.size() > kMaxDigits) fail();
    }
    ++offset_;
  }
}

void IdParser::finish(std::vector<int64_t>& ids) { end_token(ids); }

void IdParser::end_token(std::vector<int64_t>& ids) {
  if (token_.empty()) return;
  int64_t value = 0;
  for (const char c : token_) {
    if (c < '0' || c > '9') fail();
    value = value * 10 + (c - '0');
  }
  ids.push_back(value);
  token_.clear();
}

void IdParser::fail() const {
  throw Error(detail::concat("bpe decode: \"", token_.substr(0, 20), "\" at byte ", token_at_,
                             " is not a token id"));
}

}  // namespace attn::cli
