// Rows of floats stored as a q8 KV cache holds them (attn/kv_cache.hpp): d int8 values and
// then the row's scale max|x| / 127 rounded to the nearest bfloat16 (its 2 bytes), each value
// x / scale rounded to nearest-even and kept within ±127.
// Vectorised with Highway; the same bits as the plain rule on every target. Internal.
#pragma once

#include <cstdint>

namespace attn::kernels {

// Row t of x (d floats at x + t·stride, finite) as q8 at out + t·out_stride, for t < rows. A
// row whose largest |x| is below 1e-36 is stored as zeros.
void store_q8_rows(const float* x, int64_t stride, int64_t rows, int64_t d, int8_t* out,
                   int64_t out_stride);

}  // namespace attn::kernels
