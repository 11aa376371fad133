// Tensor storage: the memory a Tensor's views share (attn/tensor.hpp declares it only). Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace attn::detail {

// Tensor storage memory: buffers of 32 MiB and more are 2 MiB aligned, offset by a per-buffer
// "colour" and marked for transparent huge pages (madvise); smaller ones come from malloc,
// whose heap reuses them. A fresh 48 MiB buffer otherwise costs 12 288 page faults on first
// touch: 140 ms on this VM, against 4 ms in huge pages (measurements in src/core/storage.cpp).
void* allocate_storage(size_t bytes);
// The same, reading as zeros: malloc's blocks are cleared, the mapped ones are zero already
// (each page zeroed by the system when first written, on the thread that writes it), so a
// 1 GiB zero tensor costs no pass of its own.
void* allocate_zeroed_storage(size_t bytes);
void free_storage(void* p) noexcept;

// A tensor's memory: `size` floats at `data`, kept alive by `owner` — the tensor's own
// allocation, or memory that belongs to someone else (a numpy array) for as long as any view
// of it lives.
struct Storage {
  float* data;
  int64_t size;
  std::shared_ptr<void> owner;
  bool external;  // from Tensor::from_external
};

}  // namespace attn::detail
