// BPE encoding and decoding of any bytes with a byte-level tokenizer: decode(encode(text)) is
// text, byte for byte; the streaming encoder, fed the text cut at places the input chooses, and
// encode_parallel give the same ids as encode; decoding any ids gives text or attn::Error.
#include <cstdint>
#include <vector>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"
#include "fuzz_check.hpp"

namespace {

// Trained once per process, on text with words, digits, punctuation, a special token and
// multi-byte characters, so that merges of every kind exist.
const attn::BpeTokenizer& tokenizer() {
  static const attn::BpeTokenizer t = [] {
    std::string corpus;
    for (int i = 0; i < 40; ++i) {
      corpus += "First Citizen: Before we proceed any further, hear me speak. 1234 567 ";
      corpus += "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac <|endoftext|>\n\n\t  ";
    }
    attn::BpeOptions options;
    options.vocab_size = 400;
    options.byte_level = true;
    options.special_tokens = {"<|endoftext|>"};
    return attn::BpeTokenizer::train(corpus, options);
  }();
  return t;
}

// The ids the streaming encoder emits for text written in pieces of 1 + (first byte % 23).
std::vector<int64_t> stream_encode(std::string_view text, size_t piece) {
  std::vector<int64_t> ids;
  attn::BpeStreamEncoder encoder(
      tokenizer(),
      [&](std::span<const int64_t> got) { ids.insert(ids.end(), got.begin(), got.end()); },
      /*block_bytes=*/64, /*cache_words=*/16);
  for (size_t at = 0; at < text.size(); at += piece) encoder.write(text.substr(at, piece));
  encoder.finish();
  return ids;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = attn::fuzz::bytes_of(data, size);
  const attn::BpeTokenizer& t = tokenizer();
  const std::vector<int64_t> ids = t.encode(text);
  attn::fuzz::require(t.decode(ids) == text, "byte-level decode(encode(text)) == text");
  const size_t piece = size == 0 ? 1 : 1 + data[0] % 23;
  attn::fuzz::require(stream_encode(text, piece) == ids, "streaming equals whole");
  attn::fuzz::require(t.encode_parallel(text) == ids, "encode_parallel equals encode");

  // The same bytes read as ids, some beyond the vocabulary.
  std::vector<int64_t> any_ids;
  for (size_t i = 0; i + 1 < size; i += 2) any_ids.push_back(data[i] | (data[i + 1] << 8 & 0x100));
  try {
    (void)t.decode(any_ids);
  } catch (const attn::Error&) {
  }
  return 0;
}
