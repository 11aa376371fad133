#include "attn/kv_cache.hpp"

#include <cmath>
#include <cstring>

#include "attn/error.hpp"
#include "src/core/checked_size.hpp"
#include "src/kernels/decode.hpp"

namespace attn {
namespace {

// Extra zeroed elements after the storage, so that the kernel's full-vector loads of the last
// row never leave the buffer (their lanes past d meet zero query lanes).
constexpr int64_t kTailPadding = 64;
static_assert(kTailPadding >= kernels::kDecodeMaxVectorFloats);
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
  if (config.dtype == Dtype::kFloat32) {
    k32_.assign(n, 0.0f);
    v32_.assign(n, 0.0f);
  } else {
    k16_.assign(n, 0);
    v16_.assign(n, 0);
  }
}

int64_t KVCache::size() const {
  return config_.window > 0 ? std::min(position_, config_.capacity) : position_;
}

const void* KVCache::keys() const {
  return config_.dtype == Dtype::kFloat32 ? static_cast<const void*>(k32_.data())
                                          : static_cast<const void*>(k16_.data());
}

const void* KVCache::values() const {
  return config_.dtype == Dtype::kFloat32 ? static_cast<const void*>(v32_.data())
                                          : static_cast<const void*>(v16_.data());
}

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
  auto for_each_value = [&](auto&& fn) {
    for (int64_t b = 0; b < config_.batch; ++b) {
      for (int64_t h = 0; h < config_.n_kv_heads; ++h) {
        for (int64_t t = 0; t < t_new; ++t) {
          const float* krow = kp + b * ks[0] + h * ks[1] + t * ks[2];
          const float* vrow = vp + b * vs[0] + h * vs[1] + t * vs[2];
          const int64_t base =
              ((b * config_.n_kv_heads + h) * config_.capacity + slot_of(position_ + t)) * d;
          for (int64_t e = 0; e < d; ++e)
            fn(b, h, t, e, base + e, krow[e * ks[3]], vrow[e * vs[3]]);
        }
      }
    }
  };
  for_each_value([](int64_t b, int64_t h, int64_t t, int64_t e, int64_t, float kx, float vx) {
    ATTN_CHECK(std::isfinite(kx) && std::isfinite(vx),
               "KVCache::append: non-finite key or value at (", b, ", ", h, ", ", t, ", ", e, ")");
  });
  for_each_value([&](int64_t, int64_t, int64_t, int64_t, int64_t at, float kx, float vx) {
    const auto i = static_cast<size_t>(at);
    if (config_.dtype == Dtype::kFloat32) {
      k32_[i] = kx;
      v32_[i] = vx;
    } else {
      k16_[i] = to_bfloat16(kx);
      v16_[i] = to_bfloat16(vx);
    }
  });
  position_ += t_new;
}

}  // namespace attn
