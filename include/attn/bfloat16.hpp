// bfloat16 scalars: the top 16 bits of a float (8 bits of mantissa), as the KV cache stores
// them and as mixed-precision products round their operands.
#pragma once

#include <cstdint>

namespace attn {

// Rounds to nearest, ties to even; a NaN stays a (quiet) NaN.
uint16_t to_bfloat16(float x);
// The exact widening.
float from_bfloat16(uint16_t bits);

}  // namespace attn
