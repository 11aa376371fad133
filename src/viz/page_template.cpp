// Filling the pages' templates.
#include "src/viz/page_template.hpp"

#include "attn/error.hpp"

namespace attn::viz {

// JSON inside <script>. The HTML parser reads script data without knowing JSON: "</script"
// ends the element early, and "<!--" followed by "<script" puts it in a state where the real
// "</script>" no longer ends it (the page's code then never runs). JSON has "<" only inside
// strings, where "\u003c" is the same character to JSON.parse and to JavaScript, so every
// "<" is written that way; ">" and "&" too, so that no markup survives in the data at all.
std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (const char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The template with each {{NAME}} replaced by values[NAME], in one pass over the template alone
// (a title that reads "{{JS}}" stays text).
std::string fill_template(const std::string& page,
                          const std::map<std::string, std::string>& values) {
  std::string out;
  size_t from = 0;
  for (size_t at = page.find("{{"); at != std::string::npos; at = page.find("{{", from)) {
    const size_t end = page.find("}}", at);
    ATTN_CHECK(end != std::string::npos, "page template: an unclosed {{");
    const auto value = values.find(page.substr(at + 2, end - at - 2));
    ATTN_CHECK(value != values.end(), "page template: an unknown placeholder ",
               page.substr(at, end + 2 - at));
    out.append(page, from, at - from);
    out += value->second;
    from = end + 2;
  }
  return out.append(page, from);
}

}  // namespace attn::viz
