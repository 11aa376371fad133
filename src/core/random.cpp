// The transforms documented in random.hpp. Doubles and a fixed draw order keep the values
// identical across machines (glibc's log/cos/sin are accurate to well under a float ulp, so
// the rounding to float agrees).
#include "attn/random.hpp"

#include <cmath>
#include <numbers>
#include <random>

#include "attn/error.hpp"

namespace attn {
namespace {

template <typename Next>
void fill_row_major(Tensor& t, Next&& next) {
  ATTN_CHECK(t.defined(), "random fill of an undefined tensor");
  float* base = t.data();
  for_each_offset(t.shape(), t.strides(), [&](int64_t, int64_t offset) { base[offset] = next(); });
}

}  // namespace

void fill_uniform(Tensor& t, uint64_t seed, float lo, float hi) {
  ATTN_CHECK(lo <= hi, "fill_uniform: lo (", lo, ") must be <= hi (", hi, ")");
  std::mt19937_64 gen(seed);
  fill_row_major(t, [&] {
    const double u = static_cast<double>(gen() >> 40) * 0x1.0p-24;
    return static_cast<float>(lo + (static_cast<double>(hi) - lo) * u);
  });
}

void fill_normal(Tensor& t, uint64_t seed, float mean, float stddev) {
  ATTN_CHECK(stddev >= 0.0f, "fill_normal: stddev (", stddev, ") must be >= 0");
  std::mt19937_64 gen(seed);
  bool have_spare = false;
  double spare = 0.0;
  fill_row_major(t, [&] {
    double z;
    if (have_spare) {
      z = spare;
    } else {
      const double u1 = (static_cast<double>(gen() >> 11) + 1.0) * 0x1.0p-53;
      const double u2 = static_cast<double>(gen() >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      z = r * std::cos(2.0 * std::numbers::pi * u2);
      spare = r * std::sin(2.0 * std::numbers::pi * u2);
    }
    have_spare = !have_spare;
    return static_cast<float>(mean + stddev * z);
  });
}

Tensor rand_uniform(const Shape& shape, uint64_t seed, float lo, float hi) {
  Tensor t(shape);
  fill_uniform(t, seed, lo, hi);
  return t;
}

Tensor rand_normal(const Shape& shape, uint64_t seed, float mean, float stddev) {
  Tensor t(shape);
  fill_normal(t, seed, mean, stddev);
  return t;
}

}  // namespace attn
