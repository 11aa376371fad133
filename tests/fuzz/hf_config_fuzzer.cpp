// Hugging Face GPT-2 config.json (gpt2_config_from_hf): any bytes give a config attn's GPT can
// build or attn::Error, never the JSON library's exception or a config that fails later. A
// config that loads is written back (hf_config_json) and read again to the same shape.
#include <cstdint>
#include <optional>
#include <string>

#include "attn/error.hpp"
#include "attn/hf.hpp"
#include "fuzz_check.hpp"

namespace {

std::optional<attn::GptConfig> read_config(std::string_view bytes) {
  try {
    return attn::gpt2_config_from_hf(bytes);
  } catch (const attn::Error&) {
    return std::nullopt;
  }
}

bool same_shape(const attn::GptConfig& a, const attn::GptConfig& b) {
  return a.n_layer == b.n_layer && a.n_head == b.n_head && a.n_embd == b.n_embd &&
         a.block_size == b.block_size && a.vocab_size == b.vocab_size && a.bias == b.bias &&
         a.positions == b.positions && a.n_kv_head == b.n_kv_head;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<attn::GptConfig> config = read_config(attn::fuzz::bytes_of(data, size));
  if (!config) return 0;
  attn::fuzz::require(config->n_embd % config->n_head == 0, "n_embd divides by n_head");
  const std::optional<attn::GptConfig> again = read_config(attn::hf_config_json(*config));
  attn::fuzz::require(again && same_shape(*config, *again), "written back, the same config");
  return 0;
}
