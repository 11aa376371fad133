// The cap limit_simd (attn/simd.hpp) sets, as the matrix library reads it. Internal.
#pragma once

namespace attn::detail {

enum class SimdCap { kBest, kAvx512, kAvx2, kPortable };

// The cap now; oneDNN applies it as it opens, and calls matrix_library_opened() then, after
// which limit_simd may no longer change it (oneDNN fixes its instruction set on first use).
SimdCap simd_cap();
void matrix_library_opened();

}  // namespace attn::detail
