// GPT-2's tokenizer: its file readers and its encoder. The first byte chooses what the rest is:
//   even: text, encoded with GPT-2's own files (tests/fixtures/gpt2): decode(encode(text)) is
//         the text, byte for byte, and encode_parallel gives the same ids;
//   odd:  a tokenizer.json, or (after a NUL) a vocab.json and its merges: a tokenizer or
//         attn::Error; one that loads encodes and decodes a fixed text back exactly.
#include <cstdint>
#include <optional>
#include <string>

#include "attn/error.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "fuzz_check.hpp"

namespace {

const attn::Gpt2Tokenizer& gpt2() {
  static const attn::Gpt2Tokenizer t = attn::Gpt2Tokenizer::load(ATTN_FIXTURES_DIR "/gpt2");
  return t;
}

std::optional<attn::Gpt2Tokenizer> read_files(std::string_view bytes) {
  try {
    const size_t nul = bytes.find('\0');
    if (nul == std::string_view::npos) return attn::Gpt2Tokenizer::from_tokenizer_json(bytes);
    return attn::Gpt2Tokenizer::from_vocab_and_merges(bytes.substr(0, nul), bytes.substr(nul + 1));
  } catch (const attn::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = attn::fuzz::bytes_of(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    const std::vector<int64_t> ids = gpt2().encode(rest);
    attn::fuzz::require(gpt2().decode(ids) == rest, "decode(encode(text)) == text");
    attn::fuzz::require(gpt2().encode_parallel(rest) == ids, "encode_parallel equals encode");
    return 0;
  }
  const std::optional<attn::Gpt2Tokenizer> t = read_files(rest);
  if (!t) return 0;
  const std::string text = "Hello, world! It's 2026 \xe2\x80\x94 caf\xc3\xa9\n\n  <|endoftext|>";
  attn::fuzz::require(t->decode(t->encode(text)) == text, "a loaded tokenizer round-trips");
  return 0;
}
