// GPT-2 models in Hugging Face's layout: a directory with config.json and model.safetensors
// (F32, F16 or BF16; names with or without the "transformer." prefix; an lm_head.weight
// absent or equal to wte, since attn's GPT ties them), and GPT-2's tokenizer files beside them.
//
// config.json must describe GPT-2: n_layer, n_head, n_embd, n_positions, vocab_size;
// activation_function "gelu_new" (the default), layer_norm_epsilon 1e-5, n_inner null or
// 4·n_embd. Weights are read as GPT-2 stores them — Conv1D, (in, out) — which is attn's own
// orientation: c_attn is [Wq | Wk | Wv], heads in column blocks of n_embd / n_head. Every
// tensor must be there with its shape; a missing, mis-shaped, non-finite or unexpected tensor
// is an attn::Error naming it (the attention-mask buffers attn.bias / attn.masked_bias that
// some files carry are skipped).
#pragma once

#include <string>
#include <string_view>

#include "attn/gpt.hpp"
#include "attn/gpt2_tokenizer.hpp"

namespace attn {

// The GptConfig of a GPT-2 config.json (dropout 0: for inference).
GptConfig gpt2_config_from_hf(std::string_view config_json);

// The model of dir/config.json + dir/model.safetensors.
Gpt gpt_from_hf(const std::string& dir);

struct HfGpt2 {
  Gpt model;
  Gpt2Tokenizer tokenizer;  // from the tokenizer files in the same directory
};
HfGpt2 load_hf_gpt2(const std::string& dir);

}  // namespace attn
