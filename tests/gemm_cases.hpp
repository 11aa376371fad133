// The cases the matrix-product tests run through: sizes, both transposes of each operand, 1
// and 2 threads, with random operands.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "attn/random.hpp"
#include "attn/tensor.hpp"
#include "attn/threads.hpp"

namespace attn::testing {

struct Size {
  int64_t m, n, k;
};

// body(size, ta, tb, a, b, what) for every size, transpose of A and B, and thread count, with
// op(A) (m, k) and op(B) (k, n) drawn at random; `what` names the case for a failure.
template <class Body>
void for_every_case(std::initializer_list<Size> sizes, const Body& body) {
  for (const Size s : sizes) {
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const Tensor a = rand_normal(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, 1);
          const Tensor b = rand_normal(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, 2);
          const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                                   std::to_string(s.k) + " ta=" + std::to_string(ta) +
                                   " tb=" + std::to_string(tb) +
                                   " threads=" + std::to_string(threads);
          body(s, ta, tb, a, b, what);
        }
      }
    }
  }
  set_num_threads(0);
}

}  // namespace attn::testing
