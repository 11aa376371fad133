// Tensor storage memory (see detail::allocate_storage in attn/tensor.hpp).
//
// Blocks of 32 MiB and more — the size above which glibc maps fresh memory for every call
// instead of reusing its heap — are 2 MiB aligned and marked for transparent huge pages, and
// each starts at its own "colour", an offset of 64 + k·4160 bytes (k = 0..30 in turn), so that
// the same row of two tensors does not map to the same cache sets. Smaller blocks stay with
// malloc, whose heap reuses freed blocks without new page faults. Measured here:
//   - huge pages for the 48 MiB QKV of a multi-head block (causal T = 4096, d_model = 1024,
//     2 threads): 373 -> 315 ms for the whole block; a fresh 48 MiB block faults 12 288 small
//     pages, 140 ms on this VM, against 4 ms in huge pages;
//   - attention backward at causal T = 8192 (32 MiB tensors): 1282 -> 1014 ms;
//   - a 4 MiB threshold instead made the backward at T = 1024 (4 MiB tensors) 34 -> 48 ms on
//     one thread, and bimodal: each call's fresh huge pages cost more than the heap's reuse,
//     and without the colours every tensor started on the same cache sets.
#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "src/core/release_pages.hpp"
#include "src/core/storage.hpp"

namespace attn::detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageThreshold = size_t{32} << 20;
constexpr size_t kLine = 64;
constexpr size_t kColourStep = 4096 + kLine;  // a new page and a new line within it
constexpr unsigned kColours = 31;

std::atomic<unsigned> next_colour{0};

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

}  // namespace

void* allocate_storage(size_t bytes) {
  const bool huge = bytes >= kHugePageThreshold;
  // The block starts `offset` bytes into the allocation; the word before it holds the base.
  const size_t offset = huge ? kLine + next_colour.fetch_add(1) % kColours * kColourStep : kLine;
  const size_t alignment = huge ? kHugePage : kLine;
  const size_t total = round_up(bytes + offset, alignment);
  char* base = static_cast<char*>(std::aligned_alloc(alignment, total));
  if (base == nullptr) throw std::bad_alloc();
  if (huge) ::madvise(base, total, MADV_HUGEPAGE);  // advice only: without THP it fails harmlessly
  char* block = base + offset;
  std::memcpy(block - sizeof(base), &base, sizeof(base));
  return block;
}

size_t release_pages(void* begin, size_t bytes) noexcept {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto first = round_up(reinterpret_cast<uintptr_t>(begin), page);
  const auto last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  if (last <= first) return 0;
  // Private anonymous memory: the pages go back to the system, and read as zeros after.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

void release_free_heap() noexcept {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

void free_storage(void* block) noexcept {
  if (block == nullptr) return;
  char* base = nullptr;
  std::memcpy(&base, static_cast<char*>(block) - sizeof(base), sizeof(base));
  std::free(base);
}

}  // namespace attn::detail
