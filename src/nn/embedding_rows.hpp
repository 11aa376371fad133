// The row lookups of a token embedding, shared by TokenEmbedding and the GPT (whose table is
// a view of its parameter buffer). Ids are checked by the callers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "attn/bfloat16.hpp"

namespace attn::nn {

// out row i = table row ids[i], for n ids into a (vocab, d) table.
inline void gather_rows(const float* table, const int64_t* ids, int64_t n, int64_t d, float* out) {
  for (int64_t i = 0; i < n; ++i)
    std::copy(table + ids[i] * d, table + (ids[i] + 1) * d, out + i * d);
}

// The same from a bfloat16 table, each value widened to the float it stands for.
inline void gather_rows(const uint16_t* table, const int64_t* ids, int64_t n, int64_t d,
                        float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t* row = table + ids[i] * d;
    for (int64_t e = 0; e < d; ++e) out[i * d + e] = from_bfloat16(row[e]);
  }
}

// grad row ids[i] += d_out row i, the rows in order (so a repeated id sums in a fixed order).
inline void scatter_add_rows(const float* d_out, const int64_t* ids, int64_t n, int64_t d,
                             float* grad) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = grad + ids[i] * d;
    for (int64_t e = 0; e < d; ++e) row[e] += d_out[i * d + e];
  }
}

}  // namespace attn::nn
