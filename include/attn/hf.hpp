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

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/gpt.hpp"
#include "attn/gpt2_tokenizer.hpp"

namespace attn {

// The GptConfig of a GPT-2 config.json's text (dropout 0: for inference).
GptConfig gpt2_config_from_hf(std::string_view config_json);
// The same read from dir/config.json; an error names that path once.
GptConfig gpt2_config_from_hf_dir(const std::string& dir);

// The model of dir/config.json + dir/model.safetensors.
Gpt gpt_from_hf(const std::string& dir);

struct HfGpt2 {
  Gpt model;
  Gpt2Tokenizer tokenizer;  // from the tokenizer files in the same directory
};
HfGpt2 load_hf_gpt2(const std::string& dir);

// The other direction, for attn's GPTs with learned positions, biases and one K/V head per
// query head (attn::Error naming what GPT-2 cannot hold otherwise): config.json and
// model.safetensors (F32, names with the "transformer." prefix, the head tied to wte, as
// Hugging Face's GPT2LMHeadModel saves them). gpt_from_hf reads them back to the same model.
// end_of_text_id is the token transformers' generate() starts, stops and pads with
// (bos_token_id and eos_token_id); without one they are null, as transformers would otherwise
// assume GPT-2's 50256, which a smaller vocabulary does not have.
std::string hf_config_json(const GptConfig& config,
                           std::optional<int64_t> end_of_text_id = std::nullopt);
std::string hf_safetensors_image(const Gpt& model);
// Writes both into dir (created if missing), with extra_files (name -> bytes, e.g. a
// tokenizer.json) beside them, all or none.
void save_hf(const Gpt& model, const std::string& dir,
             const std::vector<std::pair<std::string, std::string>>& extra_files = {},
             std::optional<int64_t> end_of_text_id = std::nullopt);

// The shapes of OpenAI's GPT-2 models ("gpt2" 124M, "gpt2-medium", "gpt2-large", "gpt2-xl"):
// vocabulary 50257, 1024 positions.
GptConfig gpt2_shape(std::string_view name);

}  // namespace attn
