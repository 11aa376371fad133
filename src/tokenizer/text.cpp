#include "src/tokenizer/text.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "attn/tokenizer.hpp"

namespace attn {

void split_words(std::string_view text, const std::function<void(std::string_view)>& emit) {
  detail::for_each_word(text, emit);
}

namespace detail {

void split_on_specials(std::string_view text, const std::vector<std::string>& specials,
                       const std::function<void(std::string_view, int64_t)>& emit) {
  size_t start = 0;
  while (start < text.size()) {
    size_t best_at = std::string_view::npos;
    int64_t best = -1;
    for (size_t s = 0; s < specials.size(); ++s) {
      const size_t at = text.find(specials[s], start);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && specials[s].size() > specials[static_cast<size_t>(best)].size())) {
        best_at = at;
        best = static_cast<int64_t>(s);
      }
    }
    if (best < 0) break;
    if (best_at > start) emit(text.substr(start, best_at - start), -1);
    emit(text.substr(best_at, specials[static_cast<size_t>(best)].size()), best);
    start = best_at + specials[static_cast<size_t>(best)].size();
  }
  if (start < text.size()) emit(text.substr(start), -1);
}

std::vector<std::string_view> cut_at_word_starts(std::string_view text, int parts) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  for (int p = 1; p < parts; ++p) {
    size_t cut = std::max(start, text.size() * static_cast<size_t>(p) / static_cast<size_t>(parts));
    // Move forward to a space that follows a non-space: a word starts there.
    while (cut < text.size() && !(detail::class_of(static_cast<unsigned char>(text[cut])) == detail::CharClass::kSpace &&
                                  cut > 0 && detail::class_of(static_cast<unsigned char>(text[cut - 1])) != detail::CharClass::kSpace)) {
      ++cut;
    }
    if (cut >= text.size()) break;
    pieces.push_back(text.substr(start, cut - start));
    start = cut;
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

size_t utf8_length(std::string_view s, size_t pos) {
  const auto c = static_cast<unsigned char>(s[pos]);
  size_t length = 0;
  char32_t min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    length = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    length = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    length = 4;
    min = 0x10000;
  } else {
    return 1;  // a continuation byte or 0xF8..0xFF: not a start
  }
  if (pos + length > s.size()) return 1;
  char32_t cp = c & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xC0) != 0x80) return 1;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not well-formed.
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  return length;
}

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t length = utf8_length(s, i);
    if (length == 1 && static_cast<unsigned char>(s[i]) >= 0x80) return false;
    i += length;
  }
  return true;
}

std::string utf8_encode(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

namespace {

struct ByteDisplay {
  std::array<std::string, 256> shown;
  std::array<int16_t, 512> byte_of;  // code point -> byte, −1 if it stands for none

  ByteDisplay() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      shown[static_cast<size_t>(b)] = utf8_encode(cp);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteDisplay& byte_table() {
  static const ByteDisplay table;
  return table;
}

}  // namespace

const std::string& byte_display(unsigned char byte) { return byte_table().shown[byte]; }

bool parse_byte_display(std::string_view shown, std::string& bytes) {
  bytes.clear();
  for (size_t i = 0; i < shown.size();) {
    // Every stand-in is below U+0200: one byte (ASCII) or two (U+0080..U+01FF).
    const auto c0 = static_cast<unsigned char>(shown[i]);
    char32_t cp = 0;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if (utf8_length(shown, i) == 2) {
      cp = (static_cast<char32_t>(c0 & 0x1F) << 6) | (static_cast<unsigned char>(shown[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;
    }
    if (cp >= 512 || byte_table().byte_of[cp] < 0) return false;
    bytes += static_cast<char>(byte_table().byte_of[cp]);
  }
  return true;
}

}  // namespace detail
}  // namespace attn
