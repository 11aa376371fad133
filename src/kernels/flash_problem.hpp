// The plain-data attention problem that the fused forward and backward kernels both take
// (flash_forward.hpp, flash_backward.hpp): raw pointers and element strides, never a Tensor.
// src/attention/flash_problem.hpp builds one from tensor views.
//
// Dimension legend: B batch, H query heads, Hkv key/value heads (H % Hkv == 0),
// Tq queries, Tk keys, d query/key width, dv value width.
#pragma once

#include <cstdint>

#include "attn/mask.hpp"

namespace attn::kernels {

// bfloat16 matrices, one per (batch entry b, K/V head h) at data + (b·Hkv + h)·head, their rows
// `row` elements apart, zero-padded (amx_operands.hpp says how far).
struct Bf16Matrices {
  const uint16_t* data = nullptr;
  int64_t row = 0, head = 0;
  const uint16_t* of(int64_t b, int64_t kv_heads, int64_t h) const {
    return data + (b * kv_heads + h) * head;
  }
};

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
  int64_t window;           // 0 = unlimited
  int64_t query_position0;  // causal/window: the absolute position of query 0 (Tk − Tq
                            // bottom-right, 0 top-left); query i sits at query_position0 + i

  // Explicit mask as a (B, H, Tq, Tk) view (stride 0 where broadcast), or nullptr.
  const float* mask;
  int64_t mask_stride[4];
  MaskKind mask_kind;
  const int64_t* key_lengths;  // per batch entry: keys j >= key_lengths[b] are padding; or nullptr
  const int64_t* key_starts;   // per batch entry: keys j < key_starts[b] are padding; or nullptr

  // The variants (attn/sdpa.hpp): soft-capping's c (0 = off), ALiBi's slope and the sink's
  // logit per query head (H floats each, or nullptr).
  float softcap;
  const float* alibi_slopes;
  const float* sinks;

  // bf16 products (SdpaOptions::precision): the caller rounded Q, K, V (and dO) to bfloat16;
  // the kernels round P before P·V and, in the backward, P and dS before their products.
  bool bf16_products;

  // bfloat16 tensors (attn/sdpa_bfloat16.hpp): Q, K and V read as bfloat16 words at these
  // pointers, with the strides above, and O as bfloat16 words — written by the forward (rounded
  // to nearest even as it is stored), read by the backward — where q, k, v and out are then
  // null. Only on packed tiles, whose packers read the words as they are. Null otherwise.
  const uint16_t* q_words = nullptr;
  const uint16_t* k_words = nullptr;
  const uint16_t* v_words = nullptr;
  uint16_t* out_words = nullptr;

  // bf16 products on AMX tiles (amx_tiles.hpp) or AVX-512 BF16's register tiles
  // (dpbf16_tiles.hpp), packed once per call from the rounded K and V
  // (src/attention/amx_operands.hpp); all null when the vector kernels run. The forward reads
  // amx_keys and amx_values_t, the backward amx_keys, amx_keys_t and amx_values.
  Bf16Matrices amx_keys, amx_values_t, amx_keys_t, amx_values;
  // With those set: true when the products run on AMX tiles, false on AVX-512 BF16's vdpbf16ps
  // (dpbf16_tiles.hpp: the same packed operands, for CPUs without AMX, as a Zen 4 or 5).
  bool amx_tiles;
};

// Whether the packed-tile kernels, whose products give the scores unscaled, may leave the scale
// to the step that reads them (the forward's softmax, the backward's probabilities) instead of
// a pass of its own: a positive scale (the causal −inf stays −inf) and nothing else that needs
// the scores scaled first (soft-capping, ALiBi, an explicit mask).
inline bool scores_scaled_as_read(const FlashProblem& p) {
  return p.scale > 0.0f && p.softcap == 0.0f && p.alibi_slopes == nullptr && p.mask == nullptr;
}

}  // namespace attn::kernels
