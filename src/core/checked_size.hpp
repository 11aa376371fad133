// Sizes computed from a caller's numbers. A product of user-given dimensions can pass int64
// and wrap to a small number, which then sizes a buffer the caller's numbers overrun; every
// such product goes through checked_size, which refuses before it can wrap.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "attn/error.hpp"

namespace attn::detail {

// The product of `factors` (each ≥ 1, checked by the caller), or attn::Error "<what> is too
// large: more than <limit> elements" once a partial product passes `limit` (never wraps).
inline int64_t checked_size(std::initializer_list<int64_t> factors, int64_t limit,
                            const char* what) {
  int64_t product = 1;
  for (const int64_t f : factors) {
    ATTN_CHECK(f >= 0 && (f == 0 || product <= limit / f), what, " is too large: more than ", limit,
               " elements");
    product *= f;
  }
  return product;
}

}  // namespace attn::detail
