// Handing memory back to the system without freeing the blocks around it (storage.cpp).
// Internal.
#pragma once

#include <cstddef>

namespace attn::detail {

// Returns the whole pages inside [begin, begin + bytes) to the system (madvise DONTNEED): they
// stop counting in the process's memory and read as zeros if touched again. The block stays
// allocated; the partial pages at either end keep their contents. Returns the bytes released
// (0 where the system refuses).
size_t release_pages(void* begin, size_t bytes) noexcept;

// Returns the free memory of the C library's heap to the system (glibc's malloc_trim; nothing
// elsewhere): for after a large temporary, such as a model file's tensors once copied.
void release_free_heap() noexcept;

}  // namespace attn::detail
