// Which SIMD instruction set attn's kernels run. By default the widest this CPU supports:
// Highway picks each kernel's code at run time, and oneDNN (the matrix products) picks its own
// the same way. limit_simd caps both, so the AVX2 code — 16 vector registers instead of 32 —
// can be measured and tested on an AVX-512 machine. The attn CLI and the Python module call
// limit_simd_from_environment at start, so ATTN_SIMD=avx2 works for them.
#pragma once

#include <string>
#include <string_view>

namespace attn {

// Caps the instruction set at "avx512", "avx2" or "portable" (the build's baseline: Highway's
// plain C++ target, for comparison only), or lifts the cap ("best"). An unknown name, or a set this
// CPU lacks, is an attn::Error. The matrix products follow only if this comes before the first of
// them (oneDNN fixes its choice then); a different cap later is an attn::Error.
void limit_simd(std::string_view name);

// limit_simd(ATTN_SIMD) when that environment variable is set; nothing otherwise.
void limit_simd_from_environment();

// The instruction set the kernels run now, as Highway names it ("AVX3" is AVX-512, "AVX2",
// "SCALAR").
std::string simd_target();

// Whether the CPU converts to bfloat16 and takes bf16 dot products in hardware (AVX-512 BF16),
// within the cap: the bf16 matrix products pay off only then.
bool simd_has_bf16_products();

// What attention's bf16 products (SdpaOptions::precision = kBFloat16) run on now: "amx" (AMX
// tiles), "vdpbf16ps" (AVX-512 BF16's dot products, on AMD's CPUs without AMX) or "vector" (the
// float kernels on rounded values: every other CPU, or under a cap). The same roundings on all
// three; docs/design.md says how each is chosen.
std::string bf16_attention_engine();

}  // namespace attn
