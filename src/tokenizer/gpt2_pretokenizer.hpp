// GPT-2's pre-tokenizer: the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched left to right, as regex engines match it, written out as a scanner over UTF-8 (no
// regex engine: a table lookup per character). \p{L}, \p{N} and \s are tiktoken's (the
// oracle's: Unicode 16, \s = White_Space), from tables read off it (unicode_classes.inc).
// A byte that does not start a valid UTF-8 sequence counts as one character of class other,
// so any bytes split and round-trip. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attn::detail {

enum class Gpt2Class : uint8_t { kLetter, kNumber, kSpace, kOther };

// The class of a code point (any value; a non-character is kOther).
Gpt2Class gpt2_class(uint32_t code_point);

// The code point at text[i] and its length in bytes; an invalid or truncated sequence is one
// byte long, with a code point that is kOther.
struct Utf8Char {
  uint32_t code_point;
  size_t length;
};
Utf8Char utf8_char_at(std::string_view text, size_t i);

// The length of the piece of GPT-2's pattern that starts at text[i] (i < text.size()).
size_t gpt2_piece_length(std::string_view text, size_t i);

// Calls emit(piece) for each piece of text, in order; the pieces concatenate to text.
template <typename Emit>
void for_each_gpt2_piece(std::string_view text, Emit&& emit) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = gpt2_piece_length(text, i);
    emit(text.substr(i, n));
    i += n;
  }
}

}  // namespace attn::detail
