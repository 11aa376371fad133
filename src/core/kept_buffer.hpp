// Scratch a thread keeps from one call to the next. A call repeated in a loop — attention's bf16
// operands, packed anew by every layer of every training step — would otherwise allocate a few
// hundred KiB each time, and glibc hands a block that size back to the system when it is freed
// at the top of its heap: the next call faults every page in again (about 600 page faults a
// step of the small GPT in bf16, 1.3–1.7 ms of its 16 ms). Internal.
#pragma once

#include <hwy/aligned_allocator.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace attn::detail {

// At least `bytes` of 64-byte aligned memory, taken from this thread's kept buffers when one is
// large enough, else allocated; given back to the list of the thread that destroys the lease,
// which keeps it for the next call unless it is large (more than kKeptBufferMax bytes: a long
// sequence's operands, whose allocation its products dwarf) or the list is full. A large block
// is a tensor's storage (storage.hpp): from 32 MiB on, mapped in huge pages. From malloc, the
// 48 MiB of K and V a bf16 backward packs at T = 8192 (16 heads, d 64) were mapped afresh in
// small pages by every call: 12 000 page faults, 40 ms of system time a call.
class KeptBuffer {
 public:
  explicit KeptBuffer(size_t bytes);
  ~KeptBuffer();
  KeptBuffer(const KeptBuffer&) = delete;
  KeptBuffer& operator=(const KeptBuffer&) = delete;
  KeptBuffer(KeptBuffer&&) noexcept = default;
  KeptBuffer& operator=(KeptBuffer&&) noexcept = default;

  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(large_ ? large_.get() : memory_.get());
  }
  size_t capacity() const { return capacity_; }

 private:
  struct FreeStorage {
    void operator()(uint8_t* block) const noexcept;
  };
  hwy::AlignedFreeUniquePtr<uint8_t[]> memory_;  // a block that may be kept
  std::unique_ptr<uint8_t, FreeStorage> large_;  // or one too large to keep
  size_t capacity_ = 0;
};

constexpr size_t kKeptBufferMax = size_t{8} << 20;

// The fused kernels' per-worker scratch for one call: `floats` floats for each of `workers`,
// 64-byte aligned slices of one buffer kept by the calling thread. (Each worker allocating its
// own, freed by the caller, moved the pool threads' blocks onto the caller's list.)
class WorkerScratch {
 public:
  WorkerScratch(int workers, size_t floats)
      : stride_((floats + 15) / 16 * 16),
        buffer_(static_cast<size_t>(workers) * stride_ * sizeof(float)) {}
  float* of(int worker) const {
    return buffer_.as<float>() + static_cast<size_t>(worker) * stride_;
  }

 private:
  size_t stride_;
  KeptBuffer buffer_;
};

// The bytes this thread keeps now (for tests).
size_t kept_buffer_bytes_of_this_thread();

}  // namespace attn::detail
