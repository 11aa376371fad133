// The key/value cache of one attention layer for token-by-token decoding.
//
// Storage is (B, H_kv, capacity, d) for K and for V: float32; bfloat16 (half the bytes read per
// decode step; values rounded to nearest-even when stored, widened exactly when read); or q8
// (a quarter of float's bytes and one float per row: each row of d values stored as int8 with
// the scale max|x| / 127, x ≈ scale · round(x / scale), so an element is off by at most
// scale / 2 = max|row| / 254 — a row whose largest value is below 1e-36 is kept as zeros;
// widened in registers by the decode kernel). Two modes:
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
  // for wrong shapes, non-finite values, or (fixed mode) more positions than the capacity, and
  // then leaves the cache as it was. A prompt's append spreads its K/V heads over the threads.
  void append(const Tensor& k, const Tensor& v);
  void reset() { position_ = 0; }

  int64_t position() const { return position_; }  // positions appended since reset
  int64_t size() const;                           // positions held (≤ capacity)
  int64_t capacity() const { return config_.capacity; }
  const KVCacheConfig& config() const { return config_; }

  // Raw storage for the decode kernel: row (b, h, slot) starts at byte
  // ((b·H_kv + h)·capacity + slot)·row_bytes() and holds d floats, d uint16_t bfloat16 bits,
  // or (q8) d int8 values followed by the row's scale as bfloat16 bits.
  const void* keys() const;
  const void* values() const;
  int64_t row_bytes() const { return row_bytes(config_.dtype, config_.head_dim); }
  static int64_t row_bytes(Dtype storage, int64_t head_dim);
  // The value K or V holds at (b, h, position, e), widened to float (position must be held):
  // for tests and tools, not for loops.
  float key_at(int64_t b, int64_t h, int64_t position, int64_t e) const;
  float value_at(int64_t b, int64_t h, int64_t position, int64_t e) const;
  // Every held position, oldest first, widened to float: (B, H_kv, size(), d).
  Tensor held_keys() const;
  Tensor held_values() const;
  // The slot that holds absolute position p (p must be held).
  int64_t slot_of(int64_t position) const { return position % config_.capacity; }

 private:
  KVCacheConfig config_;
  int64_t position_ = 0;
  const unsigned char* row_at(const void* storage, int64_t b, int64_t h, int64_t position) const;
  float stored_at(const void* storage, int64_t b, int64_t h, int64_t position, int64_t e) const;
  Tensor widened(const void* storage) const;

  std::vector<float> k32_, v32_;
  std::vector<uint16_t> k16_, v16_;
  std::vector<int8_t> k8_, v8_;  // q8: rows of d values and 2 bytes of scale
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
