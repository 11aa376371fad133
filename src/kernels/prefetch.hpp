// Asking the caches ahead of time for the rows an attention task will read. At short lengths
// (the GPT's T = 64) a task takes a few microseconds and its rows come from far (Q, K and V
// strided through a (B, T, 3·C) projection, written long before by another layer's step):
// with the caches cold the forward took 354 µs instead of 142 and the backward 596 instead
// of 285 at that shape. So before running a task, a worker prefetches the next one's rows,
// into L2, and the memory latency overlaps the arithmetic. A hint only: results never change.
#pragma once

#include <cstdint>

#include "src/kernels/flash_backward.hpp"
#include "src/kernels/flash_forward.hpp"

namespace attn::kernels {

// The Q rows of forward task (b, h, q0, rows) and the K, V rows of its first key block; and,
// when the output's rows lie apart (a packed batch's, a layer's (B, T, H, dv) output), the O
// rows it will write: each on a page of its own, where no hardware prefetcher follows, the
// stores' reads for ownership waited for each line (FinishRows, which writes them, took 6.5 %
// of eight packed sequences' forward, 2.9 % with the rows asked for; 2.4 % from contiguous
// rows).
void prefetch_forward_block(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows);

// For backward task (b, kv_h): the first query block's Q, O and dO rows of each query head
// sharing it, and the K, V rows of its first key block.
void prefetch_backward_head(const FlashBackwardProblem& p, int64_t b, int64_t kv_h);

// The Q, O and dO rows of query block [q0, q0 + rows) of head h, which the backward packs when
// it comes to the block: asked for while the block before it runs its pairs (at T = 1024, one
// thread on a Zen 3, the packing took 6.2–6.7 Mcycles of the backward's 155 without, 5.4–5.7
// with).
void prefetch_query_block(const FlashBackwardProblem& p, int64_t b, int64_t h, int64_t q0,
                          int64_t rows);

}  // namespace attn::kernels
