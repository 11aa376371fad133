// The cap limit_simd (attn/simd.hpp) sets, as the matrix library reads it. Internal.
#pragma once

namespace attn::detail {

enum class SimdCap { kBest, kAvx512, kAvx2, kPortable };

// The cap now; oneDNN applies it as it opens, and calls matrix_library_opened() then, after
// which limit_simd may no longer change it (oneDNN fixes its instruction set on first use).
SimdCap simd_cap();
void matrix_library_opened();

// Whether attention's bf16 products may run on AMX tiles (src/kernels/amx_tiles.hpp): the CPU
// has AMX-BF16 (and AVX-512 BF16), Linux lent this process the tile state (asked once, on first
// call), and no cap is set (limit_simd("avx512") turns AMX off, so the vector kernels can be
// compared).
bool amx_bf16_usable();
// Tests turn AMX off (and on again) to compare the AMX kernels with the vector ones in one
// process, where limit_simd may no longer change once oneDNN has opened.
void set_amx_allowed(bool allowed);

// Whether attention's bf16 products, and a prompt's products with bf16 weights
// (src/linalg/gemm_dpbf16.hpp), run on AVX-512 BF16's vdpbf16ps where AMX is not usable
// (src/kernels/dpbf16_tiles.hpp): the CPU has AVX-512 BF16, the AVX-512 kernels are dispatched,
// no cap is set (limit_simd("avx512") turns it off, as AMX), and — by default — the CPU is one
// where vdpbf16ps outruns the FMA (AMD's: simd.cpp says why not Intel's).
bool dpbf16_usable();
// Tests choose: kAlways (wherever the CPU has it, to test it on any such CPU), kNever (the
// vector kernels), or the default kWhereFaster.
enum class Dpbf16Use { kWhereFaster, kAlways, kNever };
void set_dpbf16_use(Dpbf16Use use);

}  // namespace attn::detail
