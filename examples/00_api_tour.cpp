// The API tour of the README, compiled and run by ctest so that the README stays true.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "attn/attn.hpp"

int main() {
  // Seeded tensors: the same numbers on every machine (std::mt19937_64 + documented transforms).
  attn::Tensor q = attn::rand_normal({2, 4, 5, 16}, /*seed=*/1);  // (B, H, Tq, d)
  attn::Tensor k = attn::rand_normal({2, 4, 5, 16}, 2);           // (B, H, Tk, d)
  attn::Tensor v = attn::rand_normal({2, 4, 5, 16}, 3);           // (B, H, Tk, dv)

  // softmax(Q·Kᵀ/√d)·V with a causal mask on the fused path: the output (2,4,5,16) and the
  // logsumexp (2,4,5); the weights (2,4,5,5) only when asked for.
  attn::SdpaOptions options;
  options.causal = true;
  options.return_weights = true;
  attn::SdpaResult r = attn::sdpa(q, k, v, options);

  // The readable reference path always returns the weights.
  attn::SdpaResult same = attn::reference::sdpa(q, k, v, options);

  // Gradients for training: given dL/dO, dL/dQ, dL/dK and dL/dV. The fused backward recomputes
  // the weights block by block from the forward's logsumexp; the reference one builds them.
  attn::Tensor d_out = attn::rand_normal({2, 4, 5, 16}, 11);
  attn::SdpaGradients grads = attn::sdpa_backward(q, k, v, r.output, r.logsumexp, d_out, options);
  attn::SdpaGradients grads_ref = attn::reference::sdpa_backward(q, k, v, d_out, options);

  // Other masks: an explicit boolean mask (true = allowed) or an additive one, broadcast to
  // (…, Tq, Tk); a sliding window; grouped-query attention (K/V with 2 heads for Q's 4).
  options.mask = attn::Mask::allow(attn::causal_mask(5));
  options.window = 3;
  attn::Tensor k2 = attn::rand_normal({2, 2, 5, 16}, 4), v2 = attn::rand_normal({2, 2, 5, 16}, 5);
  attn::SdpaResult g = attn::sdpa(q, k2, v2, options);

  // Multi-head attention, Y = X·W convention; Wo optional (attn::Tensor{} = none).
  attn::Tensor x = attn::rand_normal({2, 5, 16}, 6);  // (B, T, d_model)
  attn::Tensor wq = attn::rand_normal({16, 16}, 7, 0.f, 0.25f);
  attn::Tensor wk = attn::rand_normal({16, 16}, 8, 0.f, 0.25f);
  attn::Tensor wv = attn::rand_normal({16, 16}, 9, 0.f, 0.25f);
  attn::Tensor wo = attn::rand_normal({16, 16}, 10, 0.f, 0.25f);
  attn::MhaResult y = attn::multi_head_attention(x, wq, wk, wv, wo, /*n_heads=*/4, options);

  // Views: split_heads is a change of strides, not a copy.
  attn::Tensor heads = attn::split_heads(x, 4);  // (2, 4, 5, 4), shares x's storage

  // .npy files and heat maps.
  const std::string path =
      (std::filesystem::temp_directory_path() / "attn_api_tour_w.npy").string();
  attn::write_npy(path, y.weights);
  attn::NpyArray w = attn::read_npy(path);  // w.values, w.dtype
  std::cout << attn::heatmap_ascii(y.weights.select(0).select(0));
  std::filesystem::remove(path);

  std::printf(
      "output %s, weights %s, dq %s, gqa %s, mha %s, heads %s (shares storage: %s), read %s\n",
      r.output.shape_string().c_str(), r.weights.shape_string().c_str(),
      grads.dq.shape_string().c_str(), g.output.shape_string().c_str(),
      y.output.shape_string().c_str(), heads.shape_string().c_str(),
      heads.shares_storage(x) ? "yes" : "no", w.values.shape_string().c_str());
  return heads.shares_storage(x) && w.values.shape() == y.weights.shape() &&
                 same.weights.shape() == r.weights.shape() && grads.dk.shape() == k.shape() &&
                 grads_ref.dv.shape() == v.shape()
             ? 0
             : 1;
}
