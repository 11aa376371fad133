// Tensor storage memory (see detail::allocate_storage in attn/tensor.hpp).
#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "attn/tensor.hpp"

namespace attn::detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageThreshold = size_t{4} << 20;

}  // namespace

void* allocate_storage(size_t bytes) {
  if (bytes < kHugePageThreshold) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without THP it fails harmlessly
  return p;
}

void free_storage(void* p) noexcept { std::free(p); }

}  // namespace attn::detail
