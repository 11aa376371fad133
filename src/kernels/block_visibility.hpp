// Which keys a block of queries may see, shared by the fused forward and backward kernels:
// the range of keys worth visiting at all (causal diagonal, sliding window, padding), and how
// far below the causal diagonal a block reaches. Plain scalar code; the element-wise mask of a
// block is MaskBlock (mask_block-inl.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/flash_forward.hpp"

namespace attn::kernels {

struct KeyRange {
  int64_t begin, end;  // keys [begin, end); begin is a multiple of kKeyBlock
};

// The keys any of the queries [q0, q0 + rows) of batch entry b may see. Key blocks outside
// this range are never visited: past the causal diagonal, before the window, or padding.
KeyRange visible_keys(const FlashProblem& p, int64_t b, int64_t q0, int64_t rows);

// How far below the causal diagonal (bottom-right aligned; a sliding window implies it) one
// (query block, key block) pair reaches: key c of the block is seen by the queries
// r >= first_query_seeing(c), and queries [0, r_end) see keys [0, keys_seen_by(r_end)) at most.
// The kernels skip the tiles past it. Without a causal rule every query may see every key.
struct DiagonalCut {
  bool applies;
  int64_t offset;  // position of query 0 − the block's first key
  size_t rows, cols;
  size_t keys_seen_by(size_t r_end) const;
  size_t first_query_seeing(size_t c) const;
};
DiagonalCut diagonal_cut(const FlashProblem& p, int64_t q0, size_t rows, int64_t j0, size_t cols);

}  // namespace attn::kernels
