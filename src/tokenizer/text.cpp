#include "src/tokenizer/text.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <tuple>
#include <unordered_map>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"

namespace attn {

void split_words(std::string_view text, const std::function<void(std::string_view)>& emit) {
  detail::for_each_word(text, emit);
}

namespace detail {

namespace {

// The leftmost-longest scan for special tokens. Each special's next occurrence is remembered
// and searched again only once the scan has passed it, so a text with many specials is
// scanned about once per special, not once per special per occurrence.
class SpecialScanner {
 public:
  SpecialScanner(std::string_view text, const std::vector<std::string>& specials)
      : text_(text), specials_(specials) {
    for (const std::string& s : specials) next_.push_back(text.find(s));
  }

  // The next special the scan picks, at or after the previous pick's end: {begin, index};
  // index −1 when there is none.
  std::pair<size_t, int64_t> next() {
    size_t best_at = std::string_view::npos;
    int64_t best = -1;
    for (size_t s = 0; s < specials_.size(); ++s) {
      if (next_[s] != std::string_view::npos && next_[s] < start_)
        next_[s] = text_.find(specials_[s], start_);
      const size_t at = next_[s];
      if (at == std::string_view::npos) continue;
      if (at < best_at ||
          (at == best_at && specials_[s].size() > specials_[static_cast<size_t>(best)].size())) {
        best_at = at;
        best = static_cast<int64_t>(s);
      }
    }
    if (best >= 0) start_ = best_at + specials_[static_cast<size_t>(best)].size();
    return {best_at, best};
  }

 private:
  std::string_view text_;
  const std::vector<std::string>& specials_;
  std::vector<size_t> next_;  // each special's first occurrence at or after some earlier start
  size_t start_ = 0;
};

}  // namespace

void split_on_specials(std::string_view text, const std::vector<std::string>& specials,
                       const std::function<void(std::string_view, int64_t)>& emit) {
  // An empty special would match at the same place forever.
  for (const std::string& s : specials) {
    ATTN_CHECK(!s.empty(), "split_on_specials: a special token must not be empty");
  }
  SpecialScanner scanner(text, specials);
  size_t start = 0;
  for (auto [at, s] = scanner.next(); s >= 0; std::tie(at, s) = scanner.next()) {
    if (at > start) emit(text.substr(start, at - start), -1);
    emit(text.substr(at, specials[static_cast<size_t>(s)].size()), s);
    start = at + specials[static_cast<size_t>(s)].size();
  }
  if (start < text.size()) emit(text.substr(start), -1);
}

namespace {

bool is_word_start(std::string_view text, size_t at) {
  return at > 0 && class_of(static_cast<unsigned char>(text[at])) == CharClass::kSpace &&
         class_of(static_cast<unsigned char>(text[at - 1])) != CharClass::kSpace;
}

// The special token that split_on_specials, scanning from text's start, picks and that covers
// position `at` with bytes on both sides: {begin, end}, or {0, 0} when none does.
std::pair<size_t, size_t> special_across(std::string_view text, size_t at,
                                         const std::vector<std::string>& specials) {
  SpecialScanner scanner(text, specials);
  for (auto [begin, s] = scanner.next(); s >= 0 && begin < at;
       std::tie(begin, s) = scanner.next()) {
    const size_t end = begin + specials[static_cast<size_t>(s)].size();
    if (end > at) return {begin, end};
  }
  return {0, 0};
}

}  // namespace

size_t find_cut(std::string_view text, size_t limit, const std::vector<std::string>& specials) {
  size_t longest = 1;
  for (const std::string& s : specials) longest = std::max(longest, s.size());
  if (text.size() <= longest) return 0;
  const size_t last = text.size() - longest;  // the last place a cut may be
  size_t cut = std::min(limit, last);
  while (cut > 0 && !is_word_start(text, cut)) --cut;
  if (cut == 0) {
    cut = std::min(limit, last) + 1;
    while (cut <= last && !is_word_start(text, cut)) ++cut;
    if (cut > last) return 0;
  }
  if (specials.empty()) return cut;
  // Inside a special: cut before it, or after it when it starts the text (it is whole: it
  // starts before `last`).
  const auto [begin, end] = special_across(text, cut, specials);
  if (end == 0) return cut;
  return begin > 0 ? begin : end;
}

std::vector<std::string_view> cut_into_parts(std::string_view text, size_t parts,
                                             const std::vector<std::string>& specials) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  for (size_t p = 1; p < parts; ++p) {
    const size_t target = text.size() * p / parts;
    if (target <= start) continue;
    const size_t cut = find_cut(text.substr(start), target - start, specials);
    if (cut == 0) break;
    pieces.push_back(text.substr(start, cut));
    start += cut;
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

namespace {

// The offset of the first byte that starts no well-formed character, or s.size().
size_t non_utf8_offset(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t length = utf8_length(s, i);
    if (length == 1 && static_cast<unsigned char>(s[i]) >= 0x80) return i;
    i += length;
  }
  return s.size();
}

}  // namespace

bool is_utf8(std::string_view s) { return non_utf8_offset(s) == s.size(); }

std::string first_non_utf8(std::string_view s) {
  const size_t at = non_utf8_offset(s);
  if (at == s.size()) return "";
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(s[at]));
  return "byte " + std::to_string(at) + " (" + byte + ") starts no UTF-8 character";
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

std::string display_characters(std::string_view text) {
  std::string shown;
  for (const char c : text) {
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
      cp = (static_cast<char32_t>(c0 & 0x1F) << 6) |
           (static_cast<unsigned char>(shown[i + 1]) & 0x3F);
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
