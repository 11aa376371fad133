// The id writer of `attn bpe encode`, in the CLI's -O3 folder: it formats every token.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace attn::cli {

// Writes all of bytes to standard output and flushes; attn::Error when it cannot.
void write_stdout(std::string_view bytes);

// Writes ids as decimal text separated by single spaces, through a 16 KiB buffer; a newline
// after the last one.
class IdWriter {
 public:
  void write(std::span<const int64_t> ids);
  void finish();

 private:
  static constexpr size_t kRoom = 22;  // a space, at most 20 digits, the final newline
  void flush();
  std::string buffer_ = std::string(size_t{1} << 14, '\0');
  size_t used_ = 0;
  bool any_ = false;
};

}  // namespace attn::cli
