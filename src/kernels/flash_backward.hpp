// The fused attention backward kernel's contract, shared by the orchestration
// (src/attention/sdpa_backward.cpp) and the SIMD code (flash_backward.cpp). Plain data, as the
// forward's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/flash_forward.hpp"

namespace attn::kernels {

struct FlashBackwardProblem {
  // Q, K, V, O, the shapes, scale and masks as in the forward; logsumexp (B, H, Tq) is read.
  FlashProblem forward;
  // dO (B, H, Tq, dv) read; dQ (B, H, Tq, d), dK (B, Hkv, Tk, d), dV (B, Hkv, Tk, dv) written:
  // element strides for the b, h and t dims, the last dim contiguous.
  const float* d_out;
  int64_t d_out_stride[3];
  // bfloat16 tensors (attn/sdpa_bfloat16.hpp; with forward.q_words, k_words, v_words and
  // out_words set, forward's q, k, v, out and d_out null): dO as bfloat16 words. The gradients
  // stay float32.
  const uint16_t* d_out_words = nullptr;
  float* dq;
  int64_t dq_stride[3];
  float* dk;
  int64_t dk_stride[3];
  float* dv;
  int64_t dv_stride[3];
  // bfloat16 gradients (sdpa_backward_bfloat16 with outputs given): with these set, dK's and
  // dV's rows are rounded (to nearest, ties to even) into dk_words and dv_words at dk_stride and
  // dv_stride, dk and dv unused; dQ, which sums over the key chunks in its rows, still collects
  // in dq and is rounded into dq_words (at dq_stride) once a task has its rows complete.
  uint16_t* dq_words = nullptr;
  uint16_t* dk_words = nullptr;
  uint16_t* dv_words = nullptr;
  // With an additive mask's gradient asked for: dS = P ∘ (dP − D) of every score, (B, H, Tq, Tk)
  // with element strides for b, h and the query (keys contiguous); else nullptr. dscores_zeroed:
  // the caller zeroed it (fresh memory), so the kernel writes only the keys some query of a
  // block sees; false (a buffer the caller keeps), it writes the zeros of the others too.
  float* dscores;
  int64_t dscores_stride[3];
  bool dscores_zeroed = true;
};

// Where each piece of one task's scratch starts, in floats; total = the floats it needs.
struct BackwardScratchLayout {
  size_t qt, dot, q_rows, do_rows, o_rows, pt, dpt, k_rows, tile, dq, dk_block, dv_block, lse,
      delta, softcap_slope;
  // The AMX tiles' operands (flash_backward.cpp), empty unless p.amx_keys is set.
  size_t amx_q_pairs, amx_do_pairs, amx_q_row_pairs, amx_do_row_pairs, amx_pt, amx_dst,
      amx_ds_pairs, amx_dqt;
  size_t total;
};
BackwardScratchLayout backward_scratch_layout(const FlashProblem& p);

// Floats of scratch one worker needs for one task of this problem.
size_t flash_backward_scratch_floats(const FlashProblem& p);

// The gradients of one K/V head of batch entry b: its dK and dV rows, and the dQ rows of the
// query heads that share it. `scratch` holds flash_backward_scratch_floats floats, 64-byte
// aligned.
// The per-head order (docs/design.md): one task per K/V head, race-free.
void flash_backward_head(const FlashBackwardProblem& p, int64_t b, int64_t kv_h, float* scratch);

// The two-pass order, for when there are fewer K/V heads than cores: two passes with more tasks,
// at the cost of computing S, P and dP twice (7 block products per pair instead of 5).
// Pass 1: the dK, dV rows of keys [j_begin, j_begin + kKeyChunk) of K/V head kv_h (j_begin a
// multiple of kKeyChunk).
constexpr int64_t kKeyChunk = 4 * kKeyBlock;
void flash_backward_key_chunk(const FlashBackwardProblem& p, int64_t b, int64_t kv_h,
                              int64_t j_begin, float* scratch);
// Pass 2: the dQ rows of query block [q0, q0 + kQueryBlock) of head h.
void flash_backward_query_block(const FlashBackwardProblem& p, int64_t b, int64_t h, int64_t q0,
                                float* scratch);

}  // namespace attn::kernels
