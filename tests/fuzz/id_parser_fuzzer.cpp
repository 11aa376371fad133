// The id parser of `attn bpe decode`: any bytes give ids or attn::Error; cutting the input into
// chunks anywhere gives the same ids (or the same error) as feeding it whole; ids printed back
// parse to the same ids.
#include <cstdint>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "fuzz_check.hpp"
#include "tools/attn/id_parser.hpp"

namespace {

// The ids of text fed in pieces of `piece` bytes, or the error's message.
std::pair<std::vector<int64_t>, std::string> parse(std::string_view text, size_t piece) {
  attn::cli::IdParser parser;
  std::vector<int64_t> ids;
  try {
    for (size_t at = 0; at < text.size(); at += piece) parser.feed(text.substr(at, piece), ids);
    parser.finish(ids);
  } catch (const attn::Error& e) {
    return {{}, e.what()};
  }
  return {ids, ""};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = attn::fuzz::bytes_of(data, size);
  const auto whole = parse(text, text.size() + 1);
  const size_t piece = size == 0 ? 1 : 1 + data[size - 1] % 7;
  attn::fuzz::require(parse(text, piece) == whole, "chunked equals whole");
  if (!whole.second.empty()) return 0;
  std::string printed;
  for (int64_t id : whole.first) {
    attn::fuzz::require(id >= 0, "ids are non-negative");
    printed += std::to_string(id) + " ";
  }
  attn::fuzz::require(parse(printed, printed.size() + 1).first == whole.first,
                      "printed ids parse back");
  return 0;
}
