// attn::Error and the argument checks used at every public entry point.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attn {

// Thrown for every invalid argument or unreadable file. The message names the argument
// and the shapes involved, e.g. "d_model (10) must divide by n_heads (4)". Control bytes a
// message quotes from its input (a NUL would end what() early) are kept as \xNN.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
  explicit Error(const char* message) : Error(std::string(message)) {}

 private:
  static std::string printable(const std::string& message) {
    std::string out;
    out.reserve(message.size());
    for (const char c : message) {
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
    return out;
  }
};

namespace detail {

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
