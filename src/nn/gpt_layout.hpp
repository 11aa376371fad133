// The one description of a GPT's parameters, built from its config: the table of named pieces
// in buffer order (with their roles and GPT-2's names), where each block's tensors sit, and the
// size. Gpt's constructor, parameter_count, the FLOP model (gpt_flops.cpp) and the Hugging Face
// reader and writer all read it, so the model's structure is written once, here.
// Internal to the library.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/gpt.hpp"

namespace attn::nn {

// Offsets (in floats) of one block's tensors in the parameter buffer; −1 for an absent bias.
struct LayerOffsets {
  int64_t ln1_w, ln1_b, wqkv, bqkv, wo, bo, ln2_w, ln2_b, wfc, bfc, wproj, bproj;
};

// Offsets of the tensors outside the blocks; −1 when absent (wpe without learned positions,
// ln_f.bias without biases).
struct GlobalOffsets {
  int64_t wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1;
};

struct GptLayout {
  std::vector<GptParameter> table;  // in buffer order
  std::vector<LayerOffsets> blocks;
  GlobalOffsets global;
  int64_t size = 0;  // floats in all
  // The parameter that starts at `offset` (an offset of this layout's).
  const GptParameter& at(int64_t offset) const;
};

// Validates config (attn::Error naming the field), then lays its parameters out as GPT-2 does:
// wte, wpe, per block ln_1, attn (Wqkv, Wo), ln_2, mlp (Wfc, Wproj), then ln_f.
GptLayout gpt_layout(const GptConfig& config);

}  // namespace attn::nn
