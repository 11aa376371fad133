// GPT-2's pre-tokenizer pattern as a scanner (see the header for the pattern).
#include "src/tokenizer/gpt2_pretokenizer.hpp"

#include <algorithm>
#include <array>

namespace attn::detail {
namespace {

struct Range {
  uint32_t first, last;
  Gpt2Class cls;
};
constexpr Range kRanges[] = {
#include "src/tokenizer/unicode_classes.inc"
};

constexpr std::array<Gpt2Class, 128> ascii_classes() {
  std::array<Gpt2Class, 128> table{};
  for (int c = 0; c < 128; ++c) {
    const bool space = c == ' ' || (c >= '\t' && c <= '\r');  // \s in ASCII
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    table[c] = space                    ? Gpt2Class::kSpace
               : letter                 ? Gpt2Class::kLetter
               : (c >= '0' && c <= '9') ? Gpt2Class::kNumber
                                        : Gpt2Class::kOther;
  }
  return table;
}
constexpr std::array<Gpt2Class, 128> kAscii = ascii_classes();

constexpr uint32_t kInvalid = 0xFFFFFFFF;  // no code point: class other

Gpt2Class class_at(std::string_view text, size_t i, size_t* length) {
  const auto byte = static_cast<unsigned char>(text[i]);
  if (byte < 0x80) {
    *length = 1;
    return kAscii[byte];
  }
  const Utf8Char c = utf8_char_at(text, i);
  *length = c.length;
  return gpt2_class(c.code_point);
}

// The end of the run of `cls` characters from text[i].
size_t run_end(std::string_view text, size_t i, Gpt2Class cls) {
  size_t length = 0;
  while (i < text.size() && class_at(text, i, &length) == cls) i += length;
  return i;
}

// 's 't 're 've 'm 'll 'd (lower case only, as in GPT-2's pattern): the length, or 0.
size_t contraction_length(std::string_view text, size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  const char a = text[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= text.size()) return 0;
  const char b = text[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

Gpt2Class gpt2_class(uint32_t code_point) {
  if (code_point < 0x80) return kAscii[code_point];
  const Range* end = std::end(kRanges);
  const Range* r = std::upper_bound(std::begin(kRanges), end, code_point,
                                    [](uint32_t cp, const Range& x) { return cp < x.first; });
  if (r == std::begin(kRanges)) return Gpt2Class::kOther;
  --r;
  return code_point <= r->last ? r->cls : Gpt2Class::kOther;
}

Utf8Char utf8_char_at(std::string_view text, size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) return {b0, 1};
  // The sequence's length from its first byte, and the smallest code point it may hold (an
  // overlong form is invalid).
  size_t n = 0;
  uint32_t cp = 0, least = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2, cp = b0 & 0x1F, least = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, cp = b0 & 0x0F, least = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, cp = b0 & 0x07, least = 0x10000;
  } else {
    return {kInvalid, 1};
  }
  if (i + n > text.size()) return {kInvalid, 1};
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return {kInvalid, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalid, 1};
  return {cp, n};
}

size_t gpt2_piece_length(std::string_view text, size_t i) {
  if (const size_t n = contraction_length(text, i)) return n;
  size_t length = 0;
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional space (U+0020 only), then a run
  // of one class. The space is Space itself, so without it the run must start at i.
  const size_t start = text[i] == ' ' && i + 1 < text.size() ? i + 1 : i;
  const Gpt2Class cls = class_at(text, start, &length);
  if (cls != Gpt2Class::kSpace) return run_end(text, start, cls) - i;
  // "\s+(?!\S)|\s+": a run of whitespace; when a non-space follows, all of it but its last
  // character (which then goes with the word after it), unless that leaves nothing.
  size_t end = i, last = i;
  while (end < text.size() && class_at(text, end, &length) == Gpt2Class::kSpace) {
    last = end;
    end += length;
  }
  if (end == text.size() || last == i) return end - i;
  return last - i;
}

}  // namespace attn::detail
