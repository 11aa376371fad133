// Positional information for token vectors.
#pragma once

#include <cstdint>

#include "attn/tensor.hpp"

namespace attn {

// The sinusoidal table of "Attention Is All You Need", (max_len, d_model):
//   PE[p, 2i]   = sin(p / 10000^(2i / d_model))
//   PE[p, 2i+1] = cos(p / 10000^(2i / d_model))
// An odd d_model ends with a sine column (its cosine partner would be column d_model).
Tensor sinusoidal_encoding(int64_t max_len, int64_t d_model);

// x + PE[0:T] for x of shape (T, d_model) or (B, T, d_model); pe is a (max_len, d_model)
// table. Throws if T > max_len or the widths differ.
Tensor add_positional(const Tensor& x, const Tensor& pe);

}  // namespace attn
