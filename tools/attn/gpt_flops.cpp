#include "gpt_flops.hpp"

namespace attn::cli {
namespace {

// Multiply-adds per token of one block's products, split where a prompt's last layer splits
// them: Q, K and V (K and V narrower with GQA), then W_o and the MLP's two (C × 4C, 4C × C).
struct BlockMacs {
  double qkv, rest;
};

BlockMacs block_macs_per_token(const GptConfig& c) {
  const double e = static_cast<double>(c.n_embd);
  const double kv_heads = static_cast<double>(c.n_kv_head > 0 ? c.n_kv_head : c.n_head);
  const double kv_width = kv_heads * e / static_cast<double>(c.n_head);
  return {e * (e + 2.0 * kv_width), e * e + 8.0 * e * e};
}

// Multiply-adds of causal attention over t tokens, QKᵀ and P·V over the triangle.
double causal_attention_macs(const GptConfig& c, double t) {
  return t * (t + 1.0) * static_cast<double>(c.n_embd);
}

}  // namespace

double training_matmul_flops(const GptConfig& c, double windows) {
  const BlockMacs block = block_macs_per_token(c);
  const double head = static_cast<double>(c.n_embd * c.vocab_size);
  const double per_token = static_cast<double>(c.n_layer) * (block.qkv + block.rest) + head;
  const double tokens = windows * static_cast<double>(c.block_size);
  return 3.0 * 2.0 * tokens * per_token;
}

double training_attention_flops(const GptConfig& c, double windows) {
  const double forward = 2.0 * causal_attention_macs(c, static_cast<double>(c.block_size));
  return 3.5 * forward * windows * static_cast<double>(c.n_layer);
}

double prompt_flops(const GptConfig& c, double t) {
  const BlockMacs block = block_macs_per_token(c);
  const double layers = static_cast<double>(c.n_layer), e = static_cast<double>(c.n_embd);
  const double products = layers * t * block.qkv + (layers - 1.0) * t * block.rest + block.rest +
                          e * static_cast<double>(c.vocab_size);
  const double attention = (layers - 1.0) * causal_attention_macs(c, t) + 2.0 * e * t;
  return 2.0 * (products + attention);
}

}  // namespace attn::cli
