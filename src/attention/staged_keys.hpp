// One worker's consecutive copy of the K and V rows of the head it is working on, for the
// fused kernels' tasks over K and V whose rows lie apart: a packed batch's (total, H, d) rows,
// or a layer's Q, K, V columns of one (B, T, 3·H·d) tensor, H·d floats apart (4 KiB at 16 ×
// 64). The kernels read a key block's rows again for every query block; rows 4 KiB apart fall
// in the same few L1 sets and evict each other, and the hardware prefetchers do not follow
// them across pages. Copying the whole tensor first, head-major, costs about what it saves (at
// 4096 × 16 × 64, 32 MiB for K and V written to memory and read back, and as many fresh pages
// faulted in); a head's rows copied by the task that first needs them stay in that core's L2
// for the head's other query blocks, which the forward's task order gives to the same worker
// (sdpa.cpp), and for the whole of a backward task (one K/V head, sdpa_backward.cpp).
#pragma once

#include <hwy/aligned_allocator.h>

#include <cstddef>
#include <cstdint>

#include "src/kernels/flash_problem.hpp"

namespace attn::detail {

class StagedKeys {
 public:
  // Whether problem p's tasks read staged rows: K or V rows apart, a key block of them or more,
  // on the vector kernels (the packed-tile kernels read K and V packed per call, not these
  // rows).
  static bool applies(const kernels::FlashProblem& p);

  // The problem as head (b, h)'s task reads it: a copy of p whose K and V point at this
  // worker's consecutive rows of that head (K/V head h / group), copied the first time this
  // worker meets that head. Valid until the next call.
  const kernels::FlashProblem& problem_for(const kernels::FlashProblem& p, int64_t b, int64_t h);

  // The problem as head (b, h)'s task would read it now, copying nothing: the staged copy
  // where it holds that head's rows, else p (for prefetching the next task's rows).
  const kernels::FlashProblem& current_for(const kernels::FlashProblem& p, int64_t b,
                                           int64_t h) const;

 private:
  bool holds(const kernels::FlashProblem& p, int64_t b, int64_t h) const;

  const kernels::FlashProblem* source_ = nullptr;
  int64_t b_ = -1, kv_h_ = -1;
  kernels::FlashProblem staged_{};
  hwy::AlignedFreeUniquePtr<float[]> rows_;
  size_t capacity_ = 0;  // floats
};

}  // namespace attn::detail
