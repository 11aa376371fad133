// Hugging Face's tokenizer.json for attn's byte-level BPE. Internal to the library.
#pragma once

#include <nlohmann/json.hpp>

namespace attn::detail {

// The "pre_tokenizer" of a tokenizer.json that BpeTokenizer::to_hf_json writes: attn's
// split_words as a regular expression (whitespace joins the run after it; every byte ≥ 0x80,
// so every non-ASCII character, counts as a letter), then GPT-2's byte-to-character mapping
// without GPT-2's own pattern. Gpt2Tokenizer recognises exactly this value and splits words
// attn's way, so the ids are those of the BpeTokenizer that was written.
nlohmann::json attn_pre_tokenizer();

}  // namespace attn::detail
