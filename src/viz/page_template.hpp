// The HTML pages (the explorer, the training report) are templates with {{NAME}} placeholders
// and their data as JSON inside a <script> element. Internal to the library.
#pragma once

#include <map>
#include <string>

namespace attn::viz {

// The template with each {{NAME}} replaced by values[NAME], in one pass over the template alone
// (a value that reads "{{JS}}" stays text). attn::Error for a name without a value.
std::string fill_template(const std::string& page,
                          const std::map<std::string, std::string>& values);

// JSON to embed in <script>: every "<", ">" and "&" written as a \u escape (the same string
// to the JSON parser), so that no token can end or derail the script element.
std::string script_safe(const std::string& json);

}  // namespace attn::viz
