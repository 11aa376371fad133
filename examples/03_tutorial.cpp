// Walk-through 3, the tutorial: embed a short sentence (seeded embeddings + sinusoidal
// positions), causal multi-head attention with W_o, the heat map of head 0, and the check
// that perturbing every position but 0 leaves output 0 identical.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "attn/attn.hpp"

int main() {
  const std::string sentence = "attention lets every word look back";
  std::vector<std::string> words;
  std::istringstream in(sentence);
  for (std::string w; in >> w;) words.push_back(w);
  const auto seq = static_cast<int64_t>(words.size());
  const int64_t d_model = 8, heads = 2;

  // Each distinct word gets a seeded random row (all words here are distinct).
  const attn::Tensor table = attn::rand_normal({seq, d_model}, 21);
  const attn::Tensor x = attn::add_positional(table.reshape({1, seq, d_model}),
                                              attn::sinusoidal_encoding(seq, d_model));
  const float init = 0.35f;
  const attn::Tensor wq = attn::rand_normal({d_model, d_model}, 22, 0.f, init);
  const attn::Tensor wk = attn::rand_normal({d_model, d_model}, 23, 0.f, init);
  const attn::Tensor wv = attn::rand_normal({d_model, d_model}, 24, 0.f, init);
  const attn::Tensor wo = attn::rand_normal({d_model, d_model}, 25, 0.f, init);
  attn::SdpaOptions causal;
  causal.causal = true;
  causal.return_weights = true;  // for the heat map
  const attn::MhaResult r = attn::multi_head_attention(x, wq, wk, wv, wo, heads, causal);
  std::printf("\"%s\" -> X %s -> Y %s\n\nhead 0:\n", sentence.c_str(), x.shape_string().c_str(),
              r.output.shape_string().c_str());
  attn::HeatmapOptions map;
  map.row_labels = words;
  map.column_labels = words;
  std::fputs(attn::heatmap_ascii(r.weights.select(0).select(0), map).c_str(), stdout);

  attn::Tensor perturbed = x.clone();
  for (int64_t t = 1; t < seq; ++t) {
    for (int64_t c = 0; c < d_model; ++c) perturbed.at({0, t, c}) *= -3.0f;
  }
  const attn::MhaResult p = attn::multi_head_attention(perturbed, wq, wk, wv, wo, heads, causal);
  bool same = true;
  for (int64_t c = 0; c < d_model; ++c) same &= p.output.at({0, 0, c}) == r.output.at({0, 0, c});
  std::printf("\nperturbed positions 1..%lld: output 0 is %s\n", static_cast<long long>(seq - 1),
              same ? "identical" : "CHANGED");
  return same ? 0 : 1;
}
