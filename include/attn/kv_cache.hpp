// The key/value cache of one attention layer for token-by-token decoding.
//
// Storage is (B, H_kv, capacity, d) for K and for V, float32 or bfloat16 (half the bytes read
// per decode step; values are rounded to nearest-even when stored and widened exactly when
// read). Two modes:
//   - fixed (window = 0): positions 0 .. capacity−1; appending past capacity is an error;
//   - sliding window (window = w > 0): a ring buffer; position p lives in slot p mod capacity,
//     so memory stays bounded however long the generation runs. To serve n new tokens at
//     once, every query still needs its last w keys: capacity ≥ w + n − 1 (checked).
#pragma once

#include <cstdint>
#include <vector>

#include "attn/bfloat16.hpp"
#include "attn/dtype.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn {

struct KVCacheConfig {
  int64_t batch = 1;
  int64_t n_kv_heads = 1;
  int64_t head_dim = 64;  // d of K and of V
  int64_t capacity = 0;   // positions held; in window mode 0 means window + 15
  int64_t window = 0;     // 0: fixed mode; w > 0: keep the last w positions (ring buffer)
  Dtype dtype = Dtype::kFloat32;
};

class KVCache {
 public:
  explicit KVCache(const KVCacheConfig& config);

  // Appends T_new positions: k and v are (B, H_kv, T_new, d) (any strides). Throws attn::Error
  // for wrong shapes, non-finite values, or (fixed mode) more positions than the capacity.
  void append(const Tensor& k, const Tensor& v);
  void reset() { position_ = 0; }

  int64_t position() const { return position_; }  // positions appended since reset
  int64_t size() const;                           // positions held (≤ capacity)
  int64_t capacity() const { return config_.capacity; }
  const KVCacheConfig& config() const { return config_; }

  // Raw storage for the decode kernel: element (b, h, slot, e) is at
  // ((b·H_kv + h)·capacity + slot)·d + e, as float or as uint16_t bfloat16 bits.
  const void* keys() const;
  const void* values() const;
  // The slot that holds absolute position p (p must be held).
  int64_t slot_of(int64_t position) const { return position % config_.capacity; }

 private:
  KVCacheConfig config_;
  int64_t position_ = 0;
  std::vector<float> k32_, v32_;
  std::vector<uint16_t> k16_, v16_;
};

// Attention of new queries against the cache (their own keys and values appended first):
// q (B, H, Tq, d), H a multiple of H_kv; query i sits at position cache.position() − Tq + i
// and sees the cached positions ≤ its own (causal), within options.window when set (the
// cache's own window always applies). Keys are split into chunks of fixed size spread over
// the threads; the partial softmax states are merged exactly, in a fixed order, so results
// do not depend on the thread count. Explicit masks and key_lengths are not supported here.
// Returns the output (B, H, Tq, d) and the logsumexp (B, H, Tq).
SdpaResult attend_cached(const Tensor& q, const KVCache& cache, const SdpaOptions& options = {});

}  // namespace attn
