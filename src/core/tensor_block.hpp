// Tensors made as views of one allocation, for outputs that come in sets (the backward's dQ, dK
// and dV). Internal.
#pragma once

#include <vector>

#include "attn/tensor.hpp"

namespace attn::detail {

// One uninitialized, contiguous tensor per shape (shapes of tensors that exist, so their
// sizes fit), all views of a single storage block. Three
// 16 MiB gradients allocated apart each fell below the size that is mapped in huge pages
// (storage.hpp), so every call faulted their 12 288 small pages in again (glibc returns such
// blocks to the system when they are freed); 48 MiB in one block takes 24 huge ones. Each view
// starts on a cache line of its own and a page and a line further than the last ends, so the
// same row of two of them does not fall on the same cache sets.
std::vector<Tensor> uninitialized_in_one_block(const std::vector<Shape>& shapes);

}  // namespace attn::detail
