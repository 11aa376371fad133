#include "attn/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/error.hpp"
#include "src/core/checked_size.hpp"
#include "src/kernels/decode.hpp"

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

// The buffer of the cache's storage type among its three (the other two are empty).
const void* storage_of(Dtype dtype, const std::vector<float>& f32,
                       const std::vector<uint16_t>& bf16, const std::vector<int8_t>& q8) {
  switch (dtype) {
    case Dtype::kBFloat16:
      return bf16.data();
    case Dtype::kQ8:
      return q8.data();
    case Dtype::kFloat32:
      break;
  }
  return f32.data();
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
      float scale;
      std::memcpy(&scale, row + d, sizeof scale);
      return scale * static_cast<float>(static_cast<int8_t>(row[e]));
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

// Row x[0], x[stride], … (d values) as q8 at `out`: d int8 values, then the float scale
// max|x| / 127. x / scale is rounded to nearest-even, so every value is within scale / 2.
void store_q8_row(const float* x, int64_t stride, int64_t d, int8_t* out) {
  float largest = 0.0f;
  for (int64_t e = 0; e < d; ++e) largest = std::max(largest, std::fabs(x[e * stride]));
  // A row of zeros, or of values so small (below ~1e-36) that 127 / largest would overflow,
  // is stored as zeros: x · inf would be NaN for a zero, and NaN has no int8.
  const float inverse = largest >= 1e-36f ? 127.0f / largest : 0.0f;
  const float scale = inverse > 0.0f ? largest / 127.0f : 0.0f;
  for (int64_t e = 0; e < d; ++e) {
    // |x · 127 / largest| ≤ 127 up to a rounding of the product; the clamp keeps it so.
    const float q = std::clamp(std::nearbyint(x[e * stride] * inverse), -127.0f, 127.0f);
    out[e] = static_cast<int8_t>(q);
  }
  std::memcpy(out + d, &scale, sizeof scale);
}

}  // namespace

void KVCache::append(const Tensor& k, const Tensor& v) {
  const Shape expected = {config_.batch, config_.n_kv_heads,
                          k.defined() && k.rank() == 4 ? k.dim(2) : 0, config_.head_dim};
  ATTN_CHECK(k.defined() && v.defined() && k.shape() == expected && v.shape() == expected,
             "KVCache::append: k and v must be (B, H_kv, T_new, d) = ", to_string(expected),
             ", got k ", k.defined() ? k.shape_string() : "undefined", ", v ",
             v.defined() ? v.shape_string() : "undefined");
  const int64_t t_new = k.dim(2);
  if (config_.window == 0) {
    ATTN_CHECK(position_ + t_new <= config_.capacity, "KVCache::append: ", t_new,
               " new positions do not fit: ", position_, " of ", config_.capacity,
               " are used (fixed mode; use a larger capacity or a window)");
  } else {
    ATTN_CHECK(t_new <= config_.capacity, "KVCache::append: ", t_new,
               " new positions exceed the ring's capacity ", config_.capacity);
  }
  const int64_t d = config_.head_dim;
  // Element (b, h, t, e) of a view is at data()[Σ index·stride] (shapes checked above).
  const float* kp = k.data();
  const float* vp = v.data();
  const Shape& ks = k.strides();
  const Shape& vs = v.strides();
  // Two passes: check every value, then write, so that a rejected append leaves the cache
  // as it was (a ring would otherwise have overwritten positions it still holds).
  auto for_each_row = [&](auto&& fn) {
    for (int64_t b = 0; b < config_.batch; ++b) {
      for (int64_t h = 0; h < config_.n_kv_heads; ++h) {
        for (int64_t t = 0; t < t_new; ++t) {
          const int64_t row =
              (b * config_.n_kv_heads + h) * config_.capacity + slot_of(position_ + t);
          fn(b, h, t, kp + b * ks[0] + h * ks[1] + t * ks[2],
             vp + b * vs[0] + h * vs[1] + t * vs[2], row);
        }
      }
    }
  };
  for_each_row([&](int64_t b, int64_t h, int64_t t, const float* krow, const float* vrow, int64_t) {
    for (int64_t e = 0; e < d; ++e) {
      ATTN_CHECK(std::isfinite(krow[e * ks[3]]) && std::isfinite(vrow[e * vs[3]]),
                 "KVCache::append: non-finite key or value at (", b, ", ", h, ", ", t, ", ", e,
                 ")");
    }
  });
  for_each_row([&](int64_t, int64_t, int64_t, const float* krow, const float* vrow, int64_t row) {
    const auto at = static_cast<size_t>(row * d);
    switch (config_.dtype) {
      case Dtype::kFloat32:
        for (int64_t e = 0; e < d; ++e) {
          k32_[at + e] = krow[e * ks[3]];
          v32_[at + e] = vrow[e * vs[3]];
        }
        break;
      case Dtype::kBFloat16:
        for (int64_t e = 0; e < d; ++e) {
          k16_[at + e] = to_bfloat16(krow[e * ks[3]]);
          v16_[at + e] = to_bfloat16(vrow[e * vs[3]]);
        }
        break;
      case Dtype::kQ8:
        store_q8_row(krow, ks[3], d, k8_.data() + row * row_bytes());
        store_q8_row(vrow, vs[3], d, v8_.data() + row * row_bytes());
        break;
    }
  });
  position_ += t_new;
}

}  // namespace attn
