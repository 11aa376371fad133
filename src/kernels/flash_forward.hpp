// The fused attention forward kernel's contract, shared by the orchestration (src/sdpa.cpp)
// and the SIMD code (flash_forward.cpp). Plain data: the kernel sees raw pointers and
// element strides, never a Tensor.
//
// Dimension legend: B batch, H query heads, Hkv key/value heads (H % Hkv == 0),
// Tq queries, Tk keys, d query/key width, dv value width.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attn/mask.hpp"

namespace attn::kernels {

// Rows of queries per task and keys per block, chosen by measurement on this machine
// (AVX-512, 48 KiB L1d, 2 MiB L2); the figures are in flash_forward.cpp.
constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 128;
// A query block padded for the widest vectors of any target (64 lanes); a multiple of 16.
constexpr int64_t kQueryBlockPadded = (kQueryBlock + 63) / 64 * 64;

struct FlashProblem {
  // Q (B, H, Tq, d), K (B, Hkv, Tk, d), V (B, Hkv, Tk, dv), O (B, H, Tq, dv): element strides
  // for the b, h and t dims; the last dim is contiguous.
  const float* q;
  int64_t q_stride[3];
  const float* k;
  int64_t k_stride[3];
  const float* v;
  int64_t v_stride[3];
  float* out;
  int64_t out_stride[3];
  float* logsumexp;  // (B, H, Tq) contiguous, or nullptr

  int64_t batch, heads, kv_heads, tq, tk, d, dv;
  float scale;
  bool causal;
  int64_t window;  // 0 = unlimited

  // Explicit mask as a (B, H, Tq, Tk) view (stride 0 where broadcast), or nullptr.
  const float* mask;
  int64_t mask_stride[4];
  MaskKind mask_kind;
  const int64_t* key_lengths;  // per batch entry: keys j >= key_lengths[b] are padding; or nullptr
};

// Floats of scratch one worker needs for one task of this problem.
size_t flash_forward_scratch_floats(const FlashProblem& p);

// Computes rows [q0, q0 + rows) of head h in batch entry b: the output rows and their
// logsumexp. `scratch` holds flash_forward_scratch_floats(p) floats, 64-byte aligned.
void flash_forward_block(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                         float* scratch);

}  // namespace attn::kernels
