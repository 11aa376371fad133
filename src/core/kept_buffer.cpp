// See kept_buffer.hpp.
#include "src/core/kept_buffer.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "src/core/storage.hpp"

namespace attn::detail {
namespace {

// A few buffers and a few MiB: the most one call leases at once is a packed batch's operands,
// one lease a sequence; the rest are freed.
constexpr size_t kKeptPerThread = 8;
constexpr size_t kKeptTotal = 2 * kKeptBufferMax;

// This thread's kept blocks and their sizes.
std::vector<std::pair<hwy::AlignedFreeUniquePtr<uint8_t[]>, size_t>>& kept_list() {
  thread_local std::vector<std::pair<hwy::AlignedFreeUniquePtr<uint8_t[]>, size_t>> buffers;
  return buffers;
}

}  // namespace

KeptBuffer::KeptBuffer(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  auto& buffers = kept_list();
  // The smallest kept buffer that is large enough, so a small lease does not take a large one.
  auto best = buffers.end();
  for (auto it = buffers.begin(); it != buffers.end(); ++it) {
    if (it->second >= bytes && (best == buffers.end() || it->second < best->second)) best = it;
  }
  if (best != buffers.end()) {
    memory_ = std::move(best->first);
    capacity_ = best->second;
    buffers.erase(best);
    return;
  }
  if (bytes > kKeptBufferMax) {
    large_.reset(static_cast<uint8_t*>(allocate_storage(bytes)));
  } else {
    memory_ = hwy::AllocateAligned<uint8_t>(bytes);
  }
  capacity_ = bytes;
}

void KeptBuffer::FreeStorage::operator()(uint8_t* block) const noexcept { free_storage(block); }

KeptBuffer::~KeptBuffer() {
  if (!memory_) return;  // a moved-from lease, or a large one (large_ frees itself)
  auto& buffers = kept_list();
  if (buffers.size() == kKeptPerThread ||
      kept_buffer_bytes_of_this_thread() + capacity_ > kKeptTotal)
    return;  // freed
  buffers.emplace_back(std::move(memory_), capacity_);
}

size_t kept_buffer_bytes_of_this_thread() {
  size_t total = 0;
  for (const auto& b : kept_list()) total += b.second;
  return total;
}

}  // namespace attn::detail
