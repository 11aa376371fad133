#include "config_file.hpp"

#include <algorithm>

#include "attn/error.hpp"
#include "attn/files.hpp"

namespace attn::cli {
namespace {

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

// Whether the command line already gives --name (as "--name", "--name=…").
bool given(const std::vector<std::string>& args, const std::string& name) {
  const std::string flag = "--" + name;
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == flag || a.rfind(flag + "=", 0) == 0;
  });
}

}  // namespace

std::vector<std::string> expand_config(const CLI::App& command, std::vector<std::string> args) {
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                 args.begin() + static_cast<std::ptrdiff_t>(i + 2));
      break;
    }
    if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (path.empty()) return args;
  const std::string text = read_whole_file(path, kMaxConfigBytes);
  size_t line_start = 0;
  for (int line = 1; line_start < text.size(); ++line) {
    size_t end = text.find('\n', line_start);
    if (end == std::string::npos) end = text.size();
    const std::string raw = text.substr(line_start, end - line_start);
    line_start = end + 1;
    const std::string content = trim(raw.substr(0, raw.find('#')));
    if (content.empty() || content.front() == '[') continue;  // blank, comment, section header
    const size_t eq = content.find('=');
    ATTN_CHECK(eq != std::string::npos, path, ":", line, ": expected 'name = value', got '",
               content, "'");
    const std::string name = trim(content.substr(0, eq)),
                      value = unquote(trim(content.substr(eq + 1)));
    if (name == "config") continue;  // a run's config.ini records its own --config too
    const CLI::Option* option = command.get_option_no_throw("--" + name);
    ATTN_CHECK(option != nullptr, path, ":", line, ": '", name, "' is not an option of attn ",
               command.get_name());
    if (given(args, name) || value.empty()) continue;  // the command line wins; "" = unset
    if (option->get_items_expected_max() == 0) {       // a flag
      ATTN_CHECK(value == "true" || value == "false", path, ":", line, ": ", name,
                 " is a flag: true or false, got '", value, "'");
      if (value == "true") args.push_back("--" + name);
      continue;
    }
    args.push_back("--" + name);
    args.push_back(value);
  }
  return args;
}

}  // namespace attn::cli
