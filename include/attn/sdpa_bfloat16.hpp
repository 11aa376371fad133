// Fused attention on bfloat16 tensors that another library holds (PyTorch's torch.bfloat16 CPU
// tensors, through attn.torch): Q, K and V read where they lie and the output written as
// bfloat16, with no float32 copy of either.
//
// The result is sdpa's (attn/sdpa.hpp) on the same values widened to float32 with
// SdpaOptions::precision = kBFloat16 — bf16 products, float32 sums and softmax — its output
// rounded to bfloat16 (nearest, ties to even), bit for bit. Where those products run on packed
// tiles (AMX, or AVX-512 BF16: attn/simd.hpp), the tiles' packers read the words in place;
// elsewhere the inputs are widened to float32 first, which gives the same bits.
#pragma once

#include <cstdint>

#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/tensor.hpp"

namespace attn {

// bfloat16 values (the top halves of floats: attn/bfloat16.hpp) at `data`, seen with `shape`
// (rank 2..4, no dim 0) and `strides` in elements, the last dim contiguous. The memory is the
// caller's; a call reads it and keeps no reference.
struct Bfloat16View {
  const uint16_t* data = nullptr;
  Shape shape, strides;
};

// Attention of q over k and v with every option of sdpa but return_weights (an attn::Error:
// the weights are float32 matrices; call sdpa on float32 tensors for them); the precision is
// kBFloat16 whatever options say. Writes the output, contiguous, q's shape with v's last dim,
// into `out` (room for that many words, not overlapping the inputs) and returns the logsumexp
// (q's shape without its last dim, float32), as SdpaResult::logsumexp. NaN or ±inf in q, k or
// v is an attn::Error, as in sdpa.
Tensor sdpa_bfloat16(const Bfloat16View& q, const Bfloat16View& k, const Bfloat16View& v,
                     uint16_t* out, const SdpaOptions& options = {});

// The gradients of sdpa_bfloat16 for dL/d(out) = d_out: sdpa_backward's (attn/sdpa_backward.hpp)
// on the same values widened to float32 with bf16 products, bit for bit — every option it
// takes, the sinks' and an additive mask's gradients too. out is the forward's output as
// sdpa_bfloat16 wrote it (bfloat16), logsumexp what it returned. The gradients are float32
// tensors (accumulated in float32; the overload below writes them rounded to bfloat16).
SdpaGradients sdpa_backward_bfloat16(const Bfloat16View& q, const Bfloat16View& k,
                                     const Bfloat16View& v, const Bfloat16View& out,
                                     const Bfloat16View& d_out, const Tensor& logsumexp,
                                     const SdpaOptions& options = {});

// Where sdpa_backward_bfloat16 writes bfloat16 gradients: contiguous rows of q's, k's and v's
// shapes (room for that many words each, overlapping neither each other nor the inputs).
struct Bfloat16Gradients {
  uint16_t* dq = nullptr;
  uint16_t* dk = nullptr;
  uint16_t* dv = nullptr;
};

// The same gradients rounded to bfloat16 (to nearest, ties to even: the float32 ones rounded,
// bit for bit) into `into`, for a caller that keeps them in bfloat16 (attn.torch). dK and dV
// are rounded as the kernel finishes their rows; dQ, which sums over key chunks, collects in
// float32 scratch first. No float32 dK or dV is made: at T = 8192, H = 16, d = 64 that is 64
// MiB less to allocate, fault in and convert. The result holds the sinks' and the mask's
// gradients where asked for (float32); its dq, dk and dv are undefined.
SdpaGradients sdpa_backward_bfloat16(const Bfloat16View& q, const Bfloat16View& k,
                                     const Bfloat16View& v, const Bfloat16View& out,
                                     const Bfloat16View& d_out, const Tensor& logsumexp,
                                     const SdpaOptions& options, const Bfloat16Gradients& into);

}  // namespace attn
