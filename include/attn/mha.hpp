// Multi-head attention with the textbook convention Y = X·W (W is (d_in, d_out)).
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

// The projections of one head, each (d_model, d_head).
struct HeadProjections {
  Tensor wq, wk, wv;
};

namespace reference {

// wq, wk, wv: (d_model, d_model); wo: (d_model, d_out), or an undefined Tensor{} for no output
// projection.
MhaResult multi_head_attention(const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options = {});

// The per-head form: every head has its own (d_model, d_head) projections, the head outputs
// are concatenated along the feature dim, then projected by wo (if defined). Equal to the
// form above when head h's matrices are column block h of wq, wk, wv.
MhaResult multi_head_attention_per_head(const Tensor& x, const std::vector<HeadProjections>& heads,
                                        const Tensor& wo, const SdpaOptions& options = {});

}  // namespace reference

// The fast path: one GEMM (oneDNN) against [Wq | Wk | Wv], the heads as strided views of its
// output, the fused attention kernel writing the merged (B, T, H, d_head) order directly, and
// one GEMM for Wo. Weights only when options.return_weights.
MhaResult multi_head_attention(const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const Tensor& wo, int64_t n_heads,
                               const SdpaOptions& options = {});

}  // namespace attn
