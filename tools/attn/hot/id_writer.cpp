// See id_writer.hpp.
#include "tools/attn/hot/id_writer.hpp"

#include <charconv>
#include <cstdio>

#include "attn/error.hpp"

namespace attn::cli {

void write_stdout(std::string_view bytes) {
  ATTN_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size() &&
                 std::fflush(stdout) == 0,
             "cannot write to standard output");
}

void IdWriter::write(std::span<const int64_t> ids) {
  for (int64_t id : ids) {
    if (buffer_.size() - used_ < kRoom) flush();
    if (any_) buffer_[used_++] = ' ';
    used_ = static_cast<size_t>(
        std::to_chars(buffer_.data() + used_, buffer_.data() + buffer_.size(), id).ptr -
        buffer_.data());
    any_ = true;
  }
}

void IdWriter::finish() {
  if (any_) buffer_[used_++] = '\n';
  flush();
}

void IdWriter::flush() {
  write_stdout(std::string_view(buffer_.data(), used_));
  used_ = 0;
}

}  // namespace attn::cli
