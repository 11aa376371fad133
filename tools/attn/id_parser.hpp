// The reader of `attn bpe decode`'s input: whitespace-separated decimal token ids, fed in chunks
// as they are read, so a file of any size is parsed in bounded memory. Anything else (a sign, a
// letter, more than 13 digits) is an attn::Error naming the token and the byte where it starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::cli {

class IdParser {
 public:
  // Appends the ids that chunk completes (a token cut by the chunk's end waits for the next).
  void feed(std::string_view chunk, std::vector<int64_t>& ids);
  // The input has ended: appends the last id, if one was pending.
  void finish(std::vector<int64_t>& ids);

  static constexpr size_t kMaxDigits = 13;  // ids are below 2^40, far below int64's range

 private:
  void end_token(std::vector<int64_t>& ids);
  [[noreturn]] void fail() const;

  std::string token_;  // the digits of the id being read
  size_t token_at_ = 0, offset_ = 0;
};

}  // namespace attn::cli
