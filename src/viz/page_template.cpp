// Filling the pages' templates.
#include "src/viz/page_template.hpp"

#include "attn/error.hpp"

namespace attn::viz {

// JSON inside <script>: "</" would end the element early, so it is written "<\/" (the same
// string to the JSON parser).
std::string script_safe(const std::string& json) {
  std::string out;
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      out += "<\\";
    } else {
      out += json[i];
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
