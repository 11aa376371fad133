// attn::Error and the argument checks used at every public entry point.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace attn {

// Thrown for every invalid argument or unreadable file. The message names the argument
// and the shapes involved, e.g. "d_model (10) must divide by n_heads (4)".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// Streams every argument into one string: concat("got ", 3, " heads") == "got 3 heads".
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
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
