// Walk-through 4, the tutorial's first steps: from text to the vectors attention works on.
//   tokenizer = train_bpe(corpus, vocab_size=80, min_frequency=2)
//   ids       = tokenizer.encode("the quick brown fox")
//   x         = TokenEmbedding(vocab_size, d_model).forward(ids)
//   x         = add_positional(x, PositionalEncoding(max_len, d_model))
// then one causal attention layer on x, and the checks: 4 tokens, an exact round trip, the
// positional table's formula at one point, and the shapes.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.hpp"

int main() {
  // 1. A BPE tokenizer trained on the tutorial's four-line corpus.
  attn::BpeOptions options;
  options.vocab_size = 80;
  options.min_frequency = 2;
  const attn::BpeTokenizer tokenizer = attn::BpeTokenizer::train(attn::tutorial_corpus(), options);
  const std::string text = "the quick brown fox";
  const std::vector<int64_t> ids = tokenizer.encode(text);
  std::printf("vocabulary: %lld tokens (%zu merges learnt)\n",
              static_cast<long long>(tokenizer.vocab_size()), tokenizer.merges().size());
  std::printf("\"%s\" -> %zu tokens:", text.c_str(), ids.size());
  for (int64_t id : ids)
    std::printf(" %s(%lld)", tokenizer.display(id).c_str(), static_cast<long long>(id));
  std::printf("\n");

  // 2. Token embeddings and sinusoidal positions: X = E[ids] + PE[0:T], shape (1, T, d_model).
  const int64_t d_model = 8;
  const attn::TokenEmbedding embedding(tokenizer.vocab_size(), d_model, /*seed=*/3);
  const attn::PositionalEncoding positions(/*max_len=*/64, d_model);
  const attn::Tensor x = positions.add_to(embedding.forward(ids, /*batch=*/1));
  std::printf("X = embedding[ids] + PE: %s\n", x.shape_string().c_str());

  // 3. One causal attention layer on the token vectors.
  attn::MhaConfig config;
  config.d_model = d_model;
  config.n_heads = 2;
  config.seed = 4;
  const attn::MultiHeadAttention layer(config);
  attn::SdpaOptions causal;
  causal.causal = true;
  const attn::Tensor y = layer.forward(x, causal);
  std::printf("causal multi-head attention: %s -> %s\n", x.shape_string().c_str(),
              y.shape_string().c_str());

  // The checks.
  const bool four_tokens = ids.size() == 4;
  const bool round_trip = tokenizer.decode(ids) == text;
  const double pe = positions.table().at({3, 2});  // PE[3, 2] = sin(3 / 10000^(2/8))
  const bool formula = std::fabs(pe - std::sin(3.0 / std::pow(10000.0, 2.0 / 8))) < 1e-6;
  const bool shapes = x.shape() == attn::Shape{1, 4, d_model} && y.shape() == x.shape();
  std::printf("4 tokens: %s; decode(encode(text)) == text: %s; PE[3, 2] = %.6f: %s; shapes: %s\n",
              four_tokens ? "yes" : "NO", round_trip ? "yes" : "NO", pe, formula ? "ok" : "WRONG",
              shapes ? "ok" : "WRONG");
  return four_tokens && round_trip && formula && shapes ? 0 : 1;
}
