// GPT-2's tensor names for attn's parameters, shared by the Hugging Face reader and writer.
// Internal to the library.
#pragma once

#include <string>

namespace attn::detail {

// "h.3.attn.wqkv" -> "h.3.attn.c_attn.weight", "wte" -> "wte.weight"; without the
// "transformer." prefix. attn::Error for a parameter GPT-2 does not have.
std::string hf_name(const std::string& attn_name);

}  // namespace attn::detail
