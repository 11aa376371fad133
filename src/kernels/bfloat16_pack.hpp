// Matrices packed as bfloat16 for the AMX kernels' tiles (amx_tiles.hpp, flash_forward_amx.cpp),
// each float rounded to the nearest bfloat16, ties to even (as attn::to_bfloat16; a float that
// holds a bfloat16 value already keeps it). So the forward packs K and V from the caller's
// floats, with no rounded copy of them first. Vectorised with Highway. Internal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn::kernels {

// dst[t·ld + e] = bf16(k[t·stride + e]) for t < rows, e < d; zero for d <= e < ld.
void pack_bfloat16_rows(const float* k, int64_t stride, size_t rows, size_t d, size_t ld,
                        uint16_t* dst);

// dst[e·ld + t] = bf16(v[t·stride + e]) for e < dv, t < rows; zero for rows <= t < ld.
void pack_bfloat16_transposed(const float* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                              uint16_t* dst);

// The same two layouts from bfloat16 words (rows `stride` words apart): copied, not rounded.
void pack_bfloat16_rows(const uint16_t* k, int64_t stride, size_t rows, size_t d, size_t ld,
                        uint16_t* dst);
void pack_bfloat16_transposed(const uint16_t* v, int64_t stride, size_t rows, size_t dv, size_t ld,
                              uint16_t* dst);

}  // namespace attn::kernels
