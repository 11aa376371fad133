// Walk-through 1: batched causal multi-head attention, B = 2, T = 5, d_model = 16, H = 4.
// Prints the output shape, then perturbs the last token and shows that every earlier
// position's output is unchanged (the causal mask at work).
#include <cstdio>

#include "attn/attn.hpp"

int main() {
  const int64_t batch = 2, seq = 5, d_model = 16, heads = 4;
  const attn::Tensor x = attn::rand_normal({batch, seq, d_model}, /*seed=*/1);
  const float init = 0.25f;  // 1/√d_model keeps the scores near unit scale
  const attn::Tensor wq = attn::rand_normal({d_model, d_model}, 2, 0.f, init);
  const attn::Tensor wk = attn::rand_normal({d_model, d_model}, 3, 0.f, init);
  const attn::Tensor wv = attn::rand_normal({d_model, d_model}, 4, 0.f, init);
  const attn::Tensor wo = attn::rand_normal({d_model, d_model}, 5, 0.f, init);

  attn::SdpaOptions causal;
  causal.causal = true;
  causal.return_weights = true;  // the fast path builds them only on request
  const attn::MhaResult before = attn::multi_head_attention(x, wq, wk, wv, wo, heads, causal);
  std::printf("input  %s\noutput %s\nweights %s\n", x.shape_string().c_str(),
              before.output.shape_string().c_str(), before.weights.shape_string().c_str());

  attn::Tensor perturbed = x.clone();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < d_model; ++c) perturbed.at({b, seq - 1, c}) += 10.0f;
  }
  const attn::MhaResult after =
      attn::multi_head_attention(perturbed, wq, wk, wv, wo, heads, causal);

  int changed_earlier = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t + 1 < seq; ++t) {
      for (int64_t c = 0; c < d_model; ++c) {
        changed_earlier += before.output.at({b, t, c}) != after.output.at({b, t, c});
      }
    }
  }
  std::printf("after changing the last token, positions 0..%lld are %s\n",
              static_cast<long long>(seq - 2), changed_earlier == 0 ? "unchanged" : "CHANGED");
  std::printf("position %lld changed: %s\n", static_cast<long long>(seq - 1),
              before.output.at({0, seq - 1, 0}) != after.output.at({0, seq - 1, 0}) ? "yes" : "no");
  return changed_earlier == 0 ? 0 : 1;
}
