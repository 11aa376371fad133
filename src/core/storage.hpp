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
void free_storage(void* p) noexcept;

template <class T>
struct StorageAllocator {
  using value_type = T;
  StorageAllocator() = default;
  template <class U>
  StorageAllocator(const StorageAllocator<U>&) {}  // NOLINT: allocators convert implicitly
  T* allocate(size_t n) { return static_cast<T*>(allocate_storage(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { free_storage(p); }
  friend bool operator==(const StorageAllocator&, const StorageAllocator&) { return true; }
};

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
