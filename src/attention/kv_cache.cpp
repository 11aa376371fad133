#include "attn/kv_cache.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "attn/error.hpp"
#include "src/core/checked_size.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/kernels/bfloat16_pack.hpp"
#include "src/kernels/decode.hpp"
#include "src/kernels/q8_rows.hpp"
#include "src/kernels/reductions.hpp"

namespace attn {
namespace {

// Extra zeroed elements after the storage, so that the kernel's full-vector loads of the last
// row never leave the buffer (their lanes past d meet zero query lanes; for q8 these are
// bytes, and the q8 keys are read as int8 widened to int16: up to 2 · kDecodeMaxVectorFloats).
constexpr int64_t kTailPadding = 64;
static_assert(kTailPadding >= 2 * kernels::kDecodeMaxVectorFloats);
// 2^36 elements of K and as many of V: 512 GiB in float, beyond any machine it runs on.
constexpr int64_t kMaxElements = int64_t{1} << 36;

}  // namespace

KVCache::KVCache(const KVCacheConfig& config) : config_(config) {
  ATTN_CHECK(config.batch >= 1 && config.n_kv_heads >= 1 && config.head_dim >= 1,
             "KVCache: batch (", config.batch, "), n_kv_heads (", config.n_kv_heads,
             ") and head_dim (", config.head_dim, ") must be >= 1");
  // A window past kMaxElements positions could never be held, and window + 15 must not wrap.
  ATTN_CHECK(config.window >= 0 && config.window <= kMaxElements, "KVCache: window must be in [0, ",
             kMaxElements, "], got ", config.window);
  if (config.window > 0 && config.capacity == 0) config_.capacity = config.window + 15;
  ATTN_CHECK(config_.capacity >= 1, "KVCache: capacity must be >= 1, got ", config.capacity);
  ATTN_CHECK(config.window == 0 || config_.capacity >= config.window, "KVCache: capacity (",
             config_.capacity, ") must hold the window (", config.window, ")");
  const int64_t elements =
      detail::checked_size({config.batch, config.n_kv_heads, config_.capacity, config.head_dim},
                           kMaxElements, "KVCache: batch·n_kv_heads·capacity·head_dim");
  const auto n = static_cast<size_t>(elements + kTailPadding);
  switch (config.dtype) {
    case Dtype::kFloat32:
      k32_.assign(n, 0.0f);
      v32_.assign(n, 0.0f);
      break;
    case Dtype::kBFloat16:
      k16_.assign(n, 0);
      v16_.assign(n, 0);
      break;
    case Dtype::kQ8: {
      const auto bytes =
          static_cast<size_t>(elements / config.head_dim * row_bytes() + kTailPadding);
      k8_.assign(bytes, 0);
      v8_.assign(bytes, 0);
      break;
    }
  }
}

int64_t KVCache::row_bytes(Dtype storage, int64_t head_dim) {
  return kernels::kv_row_bytes(storage, head_dim);
}

int64_t KVCache::size() const {
  return config_.window > 0 ? std::min(position_, config_.capacity) : position_;
}

namespace {

// The buffer of the cache's storage type among its three (the other two are empty): read-only
// for the readers, writable for append.
template <class F32, class Bf16, class Q8>
auto storage_of(Dtype dtype, F32& f32, Bf16& bf16, Q8& q8) {
  using Pointer = std::conditional_t<std::is_const_v<F32>, const void*, void*>;
  switch (dtype) {
    case Dtype::kBFloat16:
      return static_cast<Pointer>(bf16.data());
    case Dtype::kQ8:
      return static_cast<Pointer>(q8.data());
    case Dtype::kFloat32:
      break;
  }
  return static_cast<Pointer>(f32.data());
}

}  // namespace

const void* KVCache::keys() const { return storage_of(config_.dtype, k32_, k16_, k8_); }

const void* KVCache::values() const { return storage_of(config_.dtype, v32_, v16_, v8_); }

namespace {

// Value e of a stored row of d values, widened to float: the one place that reads the three
// storage formats outside the decode kernel.
float value_in_row(Dtype dtype, const unsigned char* row, int64_t d, int64_t e) {
  switch (dtype) {
    case Dtype::kBFloat16: {
      uint16_t bits;
      std::memcpy(&bits, row + e * 2, sizeof bits);
      return from_bfloat16(bits);
    }
    case Dtype::kQ8: {
      uint16_t scale;
      std::memcpy(&scale, row + d, sizeof scale);
      return from_bfloat16(scale) * static_cast<float>(static_cast<int8_t>(row[e]));
    }
    case Dtype::kFloat32:
      break;
  }
  float x;
  std::memcpy(&x, row + e * 4, sizeof x);
  return x;
}

}  // namespace

const unsigned char* KVCache::row_at(const void* storage, int64_t b, int64_t h,
                                     int64_t position) const {
  const int64_t row = (b * config_.n_kv_heads + h) * config_.capacity + slot_of(position);
  return static_cast<const unsigned char*>(storage) + row * row_bytes();
}

float KVCache::stored_at(const void* storage, int64_t b, int64_t h, int64_t position,
                         int64_t e) const {
  ATTN_CHECK(b >= 0 && b < config_.batch && h >= 0 && h < config_.n_kv_heads && e >= 0 &&
                 e < config_.head_dim && position >= position_ - size() && position < position_,
             "KVCache: (", b, ", ", h, ", ", position, ", ", e, ") is not held");
  return value_in_row(config_.dtype, row_at(storage, b, h, position), config_.head_dim, e);
}

Tensor KVCache::widened(const void* storage) const {
  const int64_t held = size(), first = position_ - held, d = config_.head_dim;
  Tensor out({config_.batch, config_.n_kv_heads, held, d});
  float* x = out.data();
  for (int64_t b = 0; b < config_.batch; ++b) {
    for (int64_t h = 0; h < config_.n_kv_heads; ++h) {
      for (int64_t t = 0; t < held; ++t) {
        const unsigned char* row = row_at(storage, b, h, first + t);
        for (int64_t e = 0; e < d; ++e) *x++ = value_in_row(config_.dtype, row, d, e);
      }
    }
  }
  return out;
}

Tensor KVCache::held_keys() const { return widened(keys()); }

Tensor KVCache::held_values() const { return widened(values()); }

float KVCache::key_at(int64_t b, int64_t h, int64_t position, int64_t e) const {
  return stored_at(keys(), b, h, position, e);
}

float KVCache::value_at(int64_t b, int64_t h, int64_t position, int64_t e) const {
  return stored_at(values(), b, h, position, e);
}

namespace {

// The first non-finite value of k or v, named by its index, as an attn::Error (the vector scan
// found one; this finds which).
[[noreturn]] void throw_non_finite(const Tensor& k, const Tensor& v) {
  for (int64_t b = 0; b < k.dim(0); ++b)
    for (int64_t h = 0; h < k.dim(1); ++h)
      for (int64_t t = 0; t < k.dim(2); ++t)
        for (int64_t e = 0; e < k.dim(3); ++e)
          ATTN_CHECK(std::isfinite(k.at({b, h, t, e})) && std::isfinite(v.at({b, h, t, e})),
                     "KVCache::append: non-finite key or value at (", b, ", ", h, ", ", t, ", ", e,
                     ")");
  ATTN_CHECK(false, "KVCache::append: non-finite key or value");
}

// The appended rows of K/V head h of batch entry b.
const float* head_rows(const Tensor& x, int64_t b, int64_t h) {
  return x.data() + b * x.strides()[0] + h * x.strides()[1];
}

// `rows` rows of d floats, `stride` apart from x, stored in `dtype` as consecutive rows of
// `row_bytes` at out.
void store_rows(Dtype dtype, const float* x, int64_t stride, int64_t rows, int64_t d,
                int64_t row_bytes, unsigned char* out) {
  switch (dtype) {
    case Dtype::kFloat32:
      for (int64_t t = 0; t < rows; ++t)
        std::copy_n(x + t * stride, d, reinterpret_cast<float*>(out) + t * d);
      break;
    case Dtype::kBFloat16:
      kernels::pack_bfloat16_rows(x, stride, static_cast<size_t>(rows), static_cast<size_t>(d),
                                  static_cast<size_t>(d), reinterpret_cast<uint16_t*>(out));
      break;
    case Dtype::kQ8:
      kernels::store_q8_rows(x, stride, rows, d, reinterpret_cast<int8_t*>(out), row_bytes);
      break;
  }
}

}  // namespace

void KVCache::append(const Tensor& k_in, const Tensor& v_in) {
  const Shape expected = {config_.batch, config_.n_kv_heads,
                          k_in.defined() && k_in.rank() == 4 ? k_in.dim(2) : 0, config_.head_dim};
  ATTN_CHECK(
      k_in.defined() && v_in.defined() && k_in.shape() == expected && v_in.shape() == expected,
      "KVCache::append: k and v must be (B, H_kv, T_new, d) = ", to_string(expected), ", got k ",
      k_in.defined() ? k_in.shape_string() : "undefined", ", v ",
      v_in.defined() ? v_in.shape_string() : "undefined");
  const int64_t t_new = k_in.dim(2);
  if (config_.window == 0) {
    ATTN_CHECK(position_ + t_new <= config_.capacity, "KVCache::append: ", t_new,
               " new positions do not fit: ", position_, " of ", config_.capacity,
               " are used (fixed mode; use a larger capacity or a window)");
  } else {
    ATTN_CHECK(t_new <= config_.capacity, "KVCache::append: ", t_new,
               " new positions exceed the ring's capacity ", config_.capacity);
  }
  // The vector loops read rows of d contiguous floats (a view whose last dim is strided is
  // copied: no layer makes one).
  const Tensor k = k_in.strides().back() == 1 ? k_in : k_in.contiguous();
  const Tensor v = v_in.strides().back() == 1 ? v_in : v_in.contiguous();
  const int64_t d = config_.head_dim, heads = config_.batch * config_.n_kv_heads;
  // One K/V head's rows per task, the prompt's heads over the threads (a 512-token prompt of
  // GPT-2 appends 9.4 M values, 20 ms on one thread as a scalar loop); one decoded token's
  // few rows on the calling thread.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, t_new * d));
  // Two passes: check every value, then write, so that a rejected append leaves the cache
  // as it was (a ring would otherwise have overwritten positions it still holds).
  std::atomic<bool> non_finite{false};
  detail::parallel_ranges(heads, grain, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t b = i / config_.n_kv_heads, h = i % config_.n_kv_heads;
      if (kernels::any_non_finite(head_rows(k, b, h), t_new, d, k.strides()[2]) ||
          kernels::any_non_finite(head_rows(v, b, h), t_new, d, v.strides()[2]))
        non_finite.store(true, std::memory_order_relaxed);
    }
  });
  if (non_finite.load()) throw_non_finite(k, v);
  auto* const key_bytes = static_cast<unsigned char*>(storage_of(config_.dtype, k32_, k16_, k8_));
  auto* const value_bytes = static_cast<unsigned char*>(storage_of(config_.dtype, v32_, v16_, v8_));
  detail::parallel_ranges(heads, grain, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t b = i / config_.n_kv_heads, h = i % config_.n_kv_heads;
      // The new positions' slots: one run, or two where a ring wraps to slot 0.
      for (int64_t t = 0; t < t_new;) {
        const int64_t slot = slot_of(position_ + t);
        const int64_t rows = std::min(t_new - t, config_.capacity - slot);
        const int64_t at = (i * config_.capacity + slot) * row_bytes();
        store_rows(config_.dtype, head_rows(k, b, h) + t * k.strides()[2], k.strides()[2], rows, d,
                   row_bytes(), key_bytes + at);
        store_rows(config_.dtype, head_rows(v, b, h) + t * v.strides()[2], v.strides()[2], rows, d,
                   row_bytes(), value_bytes + at);
        t += rows;
      }
    }
  });
  position_ += t_new;
}

}  // namespace attn
