// The GPT's FLOP model, read off its parameter layout: a matrix W (in, out) applied to one
// token is in·out multiply-adds, so a token's products are the element counts of the matrices
// it passes through (wte counted again as the tied head). Attention is counted from T apart.
#include "attn/gpt_flops.hpp"

#include "src/nn/gpt_layout.hpp"

namespace attn {
namespace {

// Multiply-adds per token of one block's products, split where a prompt's last layer splits
// them: Wqkv (narrower with GQA), then Wo and the MLP's Wfc and Wproj.
struct BlockMacs {
  double qkv = 0.0, rest = 0.0;
};

struct TokenMacs {
  BlockMacs block;  // every block is the same
  double head = 0.0;
  double layers = 0.0;
};

TokenMacs token_macs(const GptConfig& c) {
  const nn::GptLayout layout = nn::gpt_layout(c);
  const auto numel = [&](int64_t offset) {
    double n = 1.0;
    for (int64_t d : layout.at(offset).shape) n *= static_cast<double>(d);
    return n;
  };
  TokenMacs macs;
  macs.layers = static_cast<double>(layout.blocks.size());
  macs.head = numel(layout.global.wte);
  if (!layout.blocks.empty()) {
    const nn::LayerOffsets& b = layout.blocks.front();
    macs.block = {numel(b.wqkv), numel(b.wo) + numel(b.wfc) + numel(b.wproj)};
  }
  return macs;
}

// Multiply-adds of causal attention over t tokens, QKᵀ and P·V over the triangle.
double causal_attention_macs(const GptConfig& c, double t) {
  return t * (t + 1.0) * static_cast<double>(c.n_embd);
}

}  // namespace

double training_matmul_flops(const GptConfig& c, double windows) {
  const TokenMacs macs = token_macs(c);
  const double per_token = macs.layers * (macs.block.qkv + macs.block.rest) + macs.head;
  const double tokens = windows * static_cast<double>(c.block_size);
  return 3.0 * 2.0 * tokens * per_token;
}

double training_attention_flops(const GptConfig& c, double windows) {
  const double forward = 2.0 * causal_attention_macs(c, static_cast<double>(c.block_size));
  return 3.5 * forward * windows * static_cast<double>(c.n_layer);
}

double prompt_matmul_flops(const GptConfig& c, double t) {
  const TokenMacs macs = token_macs(c);
  const double layers = macs.layers;
  return 2.0 * (layers * t * macs.block.qkv + (layers - 1.0) * t * macs.block.rest +
                macs.block.rest + macs.head);
}

double prompt_attention_flops(const GptConfig& c, double t) {
  const double layers = static_cast<double>(c.n_layer), e = static_cast<double>(c.n_embd);
  return 2.0 * ((layers - 1.0) * causal_attention_macs(c, t) + 2.0 * e * t);
}

double prompt_flops(const GptConfig& c, double t) {
  return prompt_matmul_flops(c, t) + prompt_attention_flops(c, t);
}

}  // namespace attn
