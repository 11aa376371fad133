// attn::Error and the argument checks used at every public entry point.
#pragma once

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace attn {

// What an attn::Error is about, for a caller that acts on it rather than prints it.
enum class ErrorKind {
  kInvalidArgument,  // a value, shape or setting the call cannot take
  kFile,             // a file that cannot be opened, read or written, or whose content is broken
};

// Thrown for every invalid argument or unreadable file. The message names the argument
// and the shapes involved, e.g. "d_model (10) must divide by n_heads (4)". Control bytes a
// message quotes from its input (a NUL would end what() early) are kept as \xNN. Besides the
// message, an error says its kind and, where it knows them, the argument it is about (by its
// C++ name: "n_embd") and the file: a front end names its own flag for the argument
// (`attn train` prints --n-embd) and adds the path a parser did not know, without reading
// the message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
  explicit Error(const char* message) : Error(std::string(message)) {}
  Error(ErrorKind kind, const std::string& message, std::string argument, std::string file)
      : std::runtime_error(printable(message)),
        kind_(kind),
        argument_(std::move(argument)),
        file_(std::move(file)) {}

  // "path: what", about that file.
  static Error about_file(const std::string& path, const std::string& what) {
    return Error(ErrorKind::kFile, path + ": " + what, "", path);
  }
  // An invalid value of the argument or setting `name`.
  static Error about_argument(const std::string& name, const std::string& message) {
    return Error(ErrorKind::kInvalidArgument, message, name, "");
  }

  ErrorKind kind() const { return kind_; }
  const std::string& argument() const { return argument_; }  // "" when none
  const std::string& file() const { return file_; }          // "" when none
  // This error about `path`, for a caller that read the text a parser refused: the message
  // gains the path in front, once (an error that already names its file is returned as is).
  Error in_file(const std::string& path) const {
    if (!file_.empty()) return *this;
    return Error(ErrorKind::kFile, path + ": " + what(), argument_, path);
  }

 private:
  ErrorKind kind_ = ErrorKind::kInvalidArgument;
  std::string argument_, file_;

  // A message is read by a person: past kMaxMessageBytes (a line of a file that never ends,
  // quoted whole) it is cut, saying by how much.
  static constexpr size_t kMaxMessageBytes = 4096;

  static std::string printable(const std::string& message) {
    std::string out;
    out.reserve(std::min(message.size(), kMaxMessageBytes) + 40);
    for (const char c : message.size() > kMaxMessageBytes
                            ? std::string_view(message).substr(0, kMaxMessageBytes)
                            : std::string_view(message)) {
      const auto byte = static_cast<unsigned char>(c);
      if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
        constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[byte >> 4];
        out += kHex[byte & 15];
      } else {
        out += c;
      }
    }
    if (message.size() > kMaxMessageBytes) {
      out += "… [" + std::to_string(message.size() - kMaxMessageBytes) + " more bytes]";
    }
    return out;
  }
};

namespace detail {

// At most the first `max_bytes` of text a message quotes from its input (a token, a line),
// cut where a UTF-8 character starts, with the length said when it is cut:
// excerpt(50 MB line) == "qqq…qqq… (52428800 bytes)".
inline std::string excerpt(std::string_view text, size_t max_bytes = 80) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "… (" + std::to_string(text.size()) + " bytes)";
}

// One argument of concat. A NaN is "nan" whatever its sign bit (the stream writes "-nan"
// for the NaN that 0·-inf gives, which reads like a different value).
template <typename T>
void append_to(std::ostringstream& out, const T& value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (value != value) {
      out << "nan";
      return;
    }
  }
  out << value;
}

// Streams every argument into one string: concat("got ", 3, " heads") == "got 3 heads".
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (append_to(out, args), ...);
  return out.str();
}

}  // namespace detail
}  // namespace attn

// Throws attn::Error with the streamed message when `cond` is false. A macro so that the
// message is only built on failure.
#define ATTN_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) throw ::attn::Error(::attn::detail::concat(__VA_ARGS__)); \
  } while (0)

// The same, for a check of one argument or setting, named as the C++ API names it.
#define ATTN_CHECK_ARGUMENT(cond, name, ...)                                                     \
  do {                                                                                           \
    if (!(cond)) throw ::attn::Error::about_argument(name, ::attn::detail::concat(__VA_ARGS__)); \
  } while (0)
