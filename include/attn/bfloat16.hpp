// bfloat16 scalars: the top 16 bits of a float (8 bits of mantissa), as the KV cache stores
// them and as mixed-precision products round their operands.
#pragma once

#include <bit>
#include <cstdint>

namespace attn {

// Rounds to nearest, ties to even; a NaN stays a (quiet) NaN.
uint16_t to_bfloat16(float x);
// The exact widening. Inline: the loops that widen whole matrices (bf16 weights, the KV
// cache's readers) call it per element.
inline float from_bfloat16(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

}  // namespace attn
