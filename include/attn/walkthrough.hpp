// Small hand-built inputs from the textbook walk-throughs, shared by the demo, the examples and
// the tests so that all three show the same numbers.
#pragma once

#include <cstdint>

#include "attn/tensor.hpp"

namespace attn {

// One query built to match key 2 of five 4-dimensional keys (d_k = 4, scale 1/2):
//   q = (5, 5, 0, 0), key 2 = (1, 1, 0, 0): score 5; keys 0, 3, 4 share one feature with q:
//   score 2.5; key 1 = (-1, -1, 0, 0) points away: score -5. Values are 1, 2, 99, 4, 5.
// softmax gives key 2 the weight 1 / (1 + 3e^-2.5 + e^-10) = 0.8024, so the output is
// 0.8024·99 + 0.0659·(1 + 4 + 5) ≈ 80.09: key 2 dominates, but the output is not 99.
struct MatchingKeyExample {
  Tensor q;  // (1, 4)
  Tensor k;  // (5, 4)
  Tensor v;  // (5, 1)
  int64_t matched_key = 2;
};
MatchingKeyExample matching_key_example();

// The tutorial trains its tokenizer with train_bpe(corpus, vocab_size=80, min_frequency=2) on
// a four-line corpus whose text it does not give. This one is ours: four lines in which "the",
// "quick", "brown" and "fox" recur, so that those settings learn them as single tokens and
// "the quick brown fox" encodes as 4 tokens (a test checks it).
const char* tutorial_corpus();

}  // namespace attn
