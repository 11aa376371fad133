// Text helpers the tokenizers share: UTF-8 characters and the visible forms of bytes.
// Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::detail {

// The character classes of split_words (attn/tokenizer.hpp), on bytes.
enum class CharClass : uint8_t { kSpace, kLetter, kDigit, kOther };

constexpr CharClass classify(unsigned char c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
    return CharClass::kSpace;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  return CharClass::kOther;
}

// A table lookup per byte instead of the comparisons: the word splitter's inner loop.
struct CharClasses {
  CharClass of[256];
  constexpr CharClasses() : of() {
    for (int c = 0; c < 256; ++c) of[c] = classify(static_cast<unsigned char>(c));
  }
};
inline constexpr CharClasses kCharClasses{};

inline CharClass class_of(unsigned char c) { return kCharClasses.of[c]; }

// split_words as a template, so that the per-word call inlines in the encoder's hot loops.
template <typename Emit>
void for_each_word(std::string_view text, Emit&& emit) {
  size_t start = 0, i = 0;
  const size_t n = text.size();
  while (i < n) {
    while (i < n && class_of(static_cast<unsigned char>(text[i])) == CharClass::kSpace) ++i;
    if (i < n) {  // the run after the whitespace
      const CharClass run = class_of(static_cast<unsigned char>(text[i]));
      while (i < n && class_of(static_cast<unsigned char>(text[i])) == run) ++i;
    }
    emit(text.substr(start, i - start));
    start = i;
  }
}

// The largest vocabulary a tokenizer may have (ids are packed two to a 64-bit key).
constexpr int64_t kMaxVocab = int64_t{1} << 24;

// Calls emit(piece, −1) for the text between special tokens and emit(special, index) for each
// special token found (the longest one when several start at the same place).
void split_on_specials(std::string_view text, const std::vector<std::string>& specials,
                       const std::function<void(std::string_view, int64_t)>& emit);

// A place to cut text so that encoding text[0, cut) and text[cut, …) on their own gives the ids
// of encoding the whole: where a word starts (a space after a non-space, see split_words), and
// not inside a special token — the one the leftmost-longest scan of split_on_specials picks
// from text's start (so text must start where such a scan may start: at 0 of a whole text, or
// at an earlier cut). Only cuts up to text.size() − the longest special's length are
// considered, so that every special starting before the cut is seen whole, whatever follows
// text. Returns the last cut ≤ limit; if there is none, the first one after it; 0 if text has
// no cut at all.
size_t find_cut(std::string_view text, size_t limit, const std::vector<std::string>& specials);

// text cut into up to `parts` consecutive pieces of about equal size, each cut a find_cut
// (so encoding, or splitting into words, the pieces one by one gives the whole's result).
std::vector<std::string_view> cut_into_parts(std::string_view text, size_t parts,
                                             const std::vector<std::string>& specials);

// Bytes in the character starting at s[pos]: 1–4 for a well-formed UTF-8 sequence, 1 for a
// byte that does not start one (each such byte is then a "character" of its own).
size_t utf8_length(std::string_view s, size_t pos);

// Whether s is well-formed UTF-8 throughout.
bool is_utf8(std::string_view s);

// Where s stops being UTF-8, for a message: "" when it is UTF-8 throughout, else e.g.
// "byte 1115394 (0xff) starts no UTF-8 character".
std::string first_non_utf8(std::string_view s);

// The UTF-8 encoding of code point cp.
std::string utf8_encode(char32_t cp);

// GPT-2's printable stand-in for a byte: printable Latin-1 bytes are themselves, the others
// (controls, space, …) map to U+0100 onwards in order, so a space is "Ġ" and a newline "Ċ".
// A bijection, which makes byte-level tokens valid, readable UTF-8 (and JSON) strings.
const std::string& byte_display(unsigned char byte);
// Text of a character-level token made visible: a space as "▁", a newline as "↵".
std::string display_characters(std::string_view text);
// The inverse of byte_display over a whole string; false if a character is not one of them.
bool parse_byte_display(std::string_view shown, std::string& bytes);

}  // namespace attn::detail
