// Hugging Face GPT-2 config.json (gpt2_config_from_hf): any bytes give a config attn's GPT can
// build or attn::Error, never the JSON library's exception or a config that fails later. A
// config that loads is written back (hf_config_json) and read again to the same config (every
// field, compared through attn's own JSON form of a GptConfig).
#include <cstdint>
#include <optional>
#include <string>

#include "attn/error.hpp"
#include "attn/gpt.hpp"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<attn::GptConfig> config = read_config(attn::fuzz::bytes_of(data, size));
  if (!config) return 0;
  attn::fuzz::require(config->n_embd % config->n_head == 0, "n_embd divides by n_head");
  const std::optional<attn::GptConfig> again = read_config(attn::hf_config_json(*config));
  attn::fuzz::require(again && attn::to_json(*again) == attn::to_json(*config),
                      "written back, the same config");
  return 0;
}
