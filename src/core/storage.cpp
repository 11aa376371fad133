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
// The large blocks are mapped here (mmap), not by malloc, so they are known to read as zeros:
// a zero tensor of that size is not written twice, once by the system as each page is first
// touched and once by a fill. The (16, 4096, 4096) gradient of an additive mask, 1 GiB filled
// by one thread before the backward wrote it: the backward with it 815-893 -> 772-787 ms (two
// Zen 2 threads, causal T = 4096, d = 64; the same backward without the gradient: 658-685).
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

// Under AddressSanitizer every block comes from malloc, sized to the tensor, so that a write
// past a tensor's end meets ASan's red zone rather than the slack of a mapping rounded up to
// huge pages.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

std::atomic<unsigned> next_colour{0};

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// Whether a block of this size is mapped (and so reads as zeros) rather than malloc's.
bool mapped_block(size_t bytes) { return !kAddressSanitizer && bytes >= kHugePageThreshold; }

// Before each block, two words: the start of its allocation, and the length mapped (0 for
// malloc's blocks).
struct BlockHeader {
  char* base;
  size_t mapped;
};

}  // namespace

void* allocate_storage(size_t bytes) {
  // The block starts `offset` bytes past a 64-byte (or 2 MiB) boundary; the header sits just
  // before it.
  const size_t offset = bytes >= kHugePageThreshold
                            ? kLine + next_colour.fetch_add(1) % kColours * kColourStep
                            : kLine;
  if (!mapped_block(bytes)) {
    char* base = static_cast<char*>(std::aligned_alloc(kLine, round_up(bytes + offset, kLine)));
    if (base == nullptr) throw std::bad_alloc();
    const BlockHeader header{base, 0};
    std::memcpy(base + offset - sizeof(header), &header, sizeof(header));
    return base + offset;
  }
  // Mapped here rather than by malloc (which maps blocks this large too), so that its pages
  // are known to read as zeros and allocate_zeroed_storage need not write them. One huge page
  // more than needed, for the alignment.
  const size_t mapped = round_up(bytes + offset, kHugePage) + kHugePage;
  void* map = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
  char* base = static_cast<char*>(map);
  char* aligned = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(base), kHugePage));
  // Advice only: without transparent huge pages it fails harmlessly.
  ::madvise(aligned, mapped - static_cast<size_t>(aligned - base), MADV_HUGEPAGE);
  const BlockHeader header{base, mapped};
  std::memcpy(aligned + offset - sizeof(header), &header, sizeof(header));
  return aligned + offset;
}

void* allocate_zeroed_storage(size_t bytes) {
  void* block = allocate_storage(bytes);
  // A fresh mapping reads as zeros: its pages are zeroed by the system when first written,
  // by whichever thread writes them first. malloc's blocks may be reused and are cleared.
  if (!mapped_block(bytes)) std::memset(block, 0, bytes);
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
  BlockHeader header{};
  std::memcpy(&header, static_cast<char*>(block) - sizeof(header), sizeof(header));
  if (header.mapped != 0) {
    ::munmap(header.base, header.mapped);
  } else {
    std::free(header.base);
  }
}

}  // namespace attn::detail
