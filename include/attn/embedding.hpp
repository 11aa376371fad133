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

// Rotary position embedding (RoFormer, and Meta's Llama reference code): each pair of features
// (2i, 2i+1) of the row at position p is rotated by the angle p · base^(−2i/d):
//   (x₂ᵢ, x₂ᵢ₊₁) ← (x₂ᵢ·cos − x₂ᵢ₊₁·sin, x₂ᵢ·sin + x₂ᵢ₊₁·cos).
// So the dot product of a rotated query at m and a rotated key at n depends on m − n only.
// x is (…, T, d) with d even, rotated in place (through its strides); row t sits at position
// position_offset + t.
void apply_rope(Tensor& x, int64_t position_offset, float base = 10000.0f);

// The inverse rotation (each pair turned back by the same angle). A rotation's inverse is its
// transpose, so this is also RoPE's backward: it maps dL/d(rotated x) to dL/dx.
void apply_rope_inverse(Tensor& x, int64_t position_offset, float base = 10000.0f);

}  // namespace attn
