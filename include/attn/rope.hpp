// Rotary position embeddings, applied to queries and keys inside attention (the reference path
// defines them; the attention layer and the GPT's blocks call them).
#pragma once

#include <cstdint>

#include "attn/tensor.hpp"

namespace attn {

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
