// Multi-head attention as the textbook writes it — split the heads, attend, merge, project —
// and what every path of it shares: the split and merge, the result, the optional extras
// (GQA, biases, RoPE), and the reference path (src/reference/mha.cpp). The fast path and the
// layer object are in attn/mha.hpp.
//
//   Q = X·Wq, K = X·Wk, V = X·Wv                    (B, T, d_model)
//   split_heads: (B, T, d_model) -> (B, H, T, d_head), d_head = d_model / H
//   O_h = sdpa(Q_h, K_h, V_h)                       per head
//   merge_heads: (B, H, T, d_head) -> (B, T, d_model)
//   Y = O·Wo                                        (skipped when Wo is absent)
// x may also be (T, d_model) (one sequence); the output then has no batch dim either.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn {

// (B, T, d_model) -> (B, H, T, d_head) as a view (a change of strides, no copy);
// (T, d_model) -> (H, T, d_head). Throws unless d_model divides by n_heads.
Tensor split_heads(const Tensor& x, int64_t n_heads);
// The inverse: (B, H, T, d_head) -> (B, T, H·d_head), (H, T, d_head) -> (T, H·d_head). Copies.
Tensor merge_heads(const Tensor& x);

struct MhaResult {
  Tensor output;   // (B, T, d_out) or (T, d_out)
  Tensor weights;  // (B, H, T, T) or (H, T, T); from attn::multi_head_attention only when
                   // options.return_weights (the reference path always returns them)
};

// What multi_head_attention takes beyond the textbook's matrices; every field is optional.
struct MhaExtras {
  // 0 = n_heads. Fewer (dividing n_heads): grouped-query attention, wk and wv are then
  // (d_model, n_kv_heads·d_head) and query head h uses K/V head h / (n_heads / n_kv_heads).
  int64_t n_kv_heads = 0;
  Tensor bq;          // (d_model): added to X·Wq; undefined = no bias
  Tensor bk;          // (n_kv_heads·d_head)
  Tensor bv;          // (n_kv_heads·d_head)
  Tensor bo;          // (d_out): added to O·Wo (needs wo)
  bool rope = false;  // rotary positions on Q and K (apply_rope; d_head must be even)
  float rope_base = 10000.0f;
};

// The projections of one head, each (d_model, d_head).
struct HeadProjections {
  Tensor wq, wk, wv;
};

namespace reference {

// wq, wk, wv: (d_model, d_model) (wk, wv narrower with extras.n_kv_heads); wo: (d_model,
// d_out), or an undefined Tensor{} for no output projection.
MhaResult multi_head_attention(const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options = {}, const MhaExtras& extras = {});

// The per-head form: every head has its own (d_model, d_head) projections, the head outputs
// are concatenated along the feature dim, then projected by wo (if defined). Equal to the
// form above when head h's matrices are column block h of wq, wk, wv.
MhaResult multi_head_attention_per_head(const Tensor& x, const std::vector<HeadProjections>& heads,
                                        const Tensor& wo, const SdpaOptions& options = {});

}  // namespace reference

}  // namespace attn
