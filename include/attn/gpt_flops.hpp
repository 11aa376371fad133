// How many FLOPs (2 per multiply-add) the GPT's passes do, for the benchmarks and `attn train
// --profile` to report fractions of the FMA peak; read off the model's parameter layout. Matrix
// products and attention only: LayerNorm, GELU and the residual sums are a few per cent of these
// and are left out.
#pragma once

#include "attn/gpt.hpp"

namespace attn {

// One training step on `windows` sequences of block_size tokens: every linear layer's
// forward, and its backward at twice that (dX and dW).
double training_matmul_flops(const GptConfig& c, double windows);
// The attention kernels of that step, over the causal triangle: the forward's two products
// (S = QKᵀ, O = PV) and the backward's five.
double training_attention_flops(const GptConfig& c, double windows);

// A prompt of t tokens as Gpt::decode runs it with LogitRows::kLast: every layer's QKV
// product on all t rows; causal attention, W_o and the MLP on all rows in every layer but the
// last, on the last row there; the head on one row.
double prompt_flops(const GptConfig& c, double t);
// The two parts of prompt_flops: the linear layers and the head; attention.
double prompt_matmul_flops(const GptConfig& c, double t);
double prompt_attention_flops(const GptConfig& c, double t);

}  // namespace attn
