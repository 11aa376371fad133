#include "attn/walkthrough.hpp"

namespace attn {

MatchingKeyExample matching_key_example() {
  MatchingKeyExample e;
  e.q = Tensor::from_values({1, 4}, {5, 5, 0, 0});
  e.k = Tensor::from_values({5, 4}, {1,  0,  0, 0,    // shares feature 0 with q
                                     -1, -1, 0, 0,    // points away from q
                                     1,  1,  0, 0,    // the match
                                     0,  1,  0, 0,    // shares feature 1
                                     1,  0,  1, 0});  // shares feature 0
  e.v = Tensor::from_values({5, 1}, {1, 2, 99, 4, 5});
  return e;
}

const char* tutorial_corpus() {
  return "the quick brown fox jumps over the lazy dog\n"
         "the quick brown fox sleeps while the lazy dog barks\n"
         "a quick brown dog jumps over the quick brown fox\n"
         "the fox and the dog are quick and brown\n";
}

}  // namespace attn
