// Rotary position embeddings (apply_rope in include/attn/rope.hpp): the attention layer
// rotates Q and K in place, and its backward rotates dQ and dK back.
#include "attn/rope.hpp"

#include <cmath>
#include <vector>

#include "attn/error.hpp"

namespace attn {

namespace {

// Rotates every feature pair of x by `direction` (+1 or −1) times its RoPE angle.
void rotate_pairs(Tensor& x, int64_t position_offset, float base, float direction) {
  ATTN_CHECK(x.defined() && x.rank() >= 2, "apply_rope: x must be (…, T, d), got ",
             x.defined() ? x.shape_string() : "undefined");
  const int64_t t_len = x.dim(-2), d = x.dim(-1);
  ATTN_CHECK(d % 2 == 0, "apply_rope: the feature dim (", d, ") must be even");
  ATTN_CHECK(position_offset >= 0 && base > 1.0f, "apply_rope: position_offset (", position_offset,
             ") must be >= 0 and base (", base, ") > 1");
  // cos and sin of every (row, pair), computed once in double.
  std::vector<float> cosines(static_cast<size_t>(t_len * d / 2)), sines(cosines.size());
  for (int64_t t = 0; t < t_len; ++t) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = static_cast<double>(position_offset + t) *
                           std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / d);
      cosines[static_cast<size_t>(t * d / 2 + i)] = static_cast<float>(std::cos(angle));
      sines[static_cast<size_t>(t * d / 2 + i)] = static_cast<float>(std::sin(angle));
    }
  }
  // Every row of every leading index: view x as (rows, d) rows through the strides.
  const int r = x.rank();
  Shape lead(x.shape().begin(), x.shape().end() - 1),
      lead_strides(x.strides().begin(), x.strides().end() - 1);
  const int64_t step = x.strides()[r - 1];
  float* base_ptr = x.data();
  for_each_offset(lead, lead_strides, [&](int64_t flat, int64_t offset) {
    const int64_t t = flat % t_len;
    float* row = base_ptr + offset;
    for (int64_t i = 0; i < d / 2; ++i) {
      const float c = cosines[static_cast<size_t>(t * d / 2 + i)];
      const float s = direction * sines[static_cast<size_t>(t * d / 2 + i)];
      const float a = row[2 * i * step], b = row[(2 * i + 1) * step];
      row[2 * i * step] = a * c - b * s;
      row[(2 * i + 1) * step] = a * s + b * c;
    }
  });
}

}  // namespace

void apply_rope(Tensor& x, int64_t position_offset, float base) {
  rotate_pairs(x, position_offset, base, 1.0f);
}

void apply_rope_inverse(Tensor& x, int64_t position_offset, float base) {
  rotate_pairs(x, position_offset, base, -1.0f);
}

}  // namespace attn
