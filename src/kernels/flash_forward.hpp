// The fused attention forward kernel's contract, shared by the orchestration
// (src/attention/sdpa.cpp) and the SIMD code (flash_forward.cpp). Plain data: the kernel sees raw
// pointers and element strides, never a Tensor.
//
// Dimension legend: B batch, H query heads, Hkv key/value heads (H % Hkv == 0),
// Tq queries, Tk keys, d query/key width, dv value width.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/flash_problem.hpp"

namespace attn::kernels {

// Rows of queries per task and keys per block, chosen by measurement on an AVX-512 Zen 5
// (48 KiB L1d, 2 MiB L2); the figures are in flash_forward.cpp.
constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 128;
// A query block padded for the widest vectors of any target (64 lanes); a multiple of 16.
constexpr int64_t kQueryBlockPadded = (kQueryBlock + 63) / 64 * 64;

// Floats of scratch one worker needs for one task of this problem.
size_t flash_forward_scratch_floats(const FlashProblem& p);

// Computes rows [q0, q0 + rows) of head h in batch entry b: the output rows and their
// logsumexp. `scratch` holds flash_forward_scratch_floats(p) floats, 64-byte aligned. With
// p.amx_keys set, the AMX kernel (flash_forward_amx.cpp) runs; else the vector kernel.
void flash_forward_block(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                         float* scratch);

// The AMX kernel's part of the above (flash_forward_amx.cpp).
size_t flash_forward_amx_scratch_floats(const FlashProblem& p);
void flash_forward_block_amx(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                             float* scratch);

}  // namespace attn::kernels
