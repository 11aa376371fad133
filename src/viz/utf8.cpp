// Text the painters and pages can show: well-formed UTF-8 without control characters (XML forbids
// most of them, cairo refuses malformed UTF-8 outright).
#include <string>

#include "src/viz/canvas.hpp"

namespace attn::viz {

std::string valid_utf8(const std::string& s) {
  std::string out;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    const unsigned char lead = byte(i);
    size_t len = lead < 0x80           ? 1
                 : (lead >> 5) == 0x6  ? 2
                 : (lead >> 4) == 0xE  ? 3
                 : (lead >> 3) == 0x1E ? 4
                                       : 0;
    bool ok = len > 0 && i + len <= s.size() && !(lead == 0xC0 || lead == 0xC1 || lead > 0xF4);
    for (size_t k = 1; ok && k < len; ++k) ok = (byte(i + k) >> 6) == 0x2;
    if (ok && len == 3) {
      const unsigned cp = ((lead & 0xFu) << 12) | ((byte(i + 1) & 0x3Fu) << 6);
      ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);  // not overlong, not a surrogate
    }
    if (ok && len == 4)
      ok = !(lead == 0xF0 && byte(i + 1) < 0x90) && !(lead == 0xF4 && byte(i + 1) > 0x8F);
    const bool control = ok && len == 1 && (lead < 0x20 || lead == 0x7F);
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else if (control) {
      out += "\xEF\xBF\xBD";
      i += 1;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

std::string escape_markup(const std::string& s) {
  std::string out;
  for (const char ch : valid_utf8(s)) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

}  // namespace attn::viz
