// Tokenizer files (the BPE format and the character tokenizer's): any bytes give a tokenizer
// or attn::Error. A tokenizer that loads saves to JSON that loads to the same JSON, and
// encodes and decodes a fixed text without failing.
#include <cstdint>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<attn::Tokenizer> tokenizer;
  try {
    tokenizer.emplace(attn::Tokenizer::from_json(attn::fuzz::bytes_of(data, size)));
  } catch (const attn::Error&) {
    return 0;
  }
  const std::string json = tokenizer->to_json();
  const attn::Tokenizer again = attn::Tokenizer::from_json(json);
  attn::fuzz::require(again.to_json() == json, "save, load, save gives the same file");
  try {
    // A character tokenizer refuses characters it lacks; that is an attn::Error, not a bug.
    const std::vector<int64_t> ids = tokenizer->encode("To be, or not to be: 1 2 3 \xc3\xa9\n");
    for (int64_t id : ids) {
      attn::fuzz::require(id >= 0 && id < tokenizer->vocab_size(), "ids lie in the vocabulary");
    }
    (void)tokenizer->decode(ids);
  } catch (const attn::Error&) {
  }
  return 0;
}
