#include <cmath>
#include <vector>

#include "attn/embedding.hpp"
#include "attn/error.hpp"

namespace attn {

Tensor sinusoidal_encoding(int64_t max_len, int64_t d_model) {
  ATTN_CHECK(max_len >= 1 && d_model >= 1, "sinusoidal_encoding: max_len (", max_len,
             ") and d_model (", d_model, ") must be >= 1");
  Tensor pe({max_len, d_model});
  for (int64_t p = 0; p < max_len; ++p) {
    for (int64_t c = 0; c < d_model; ++c) {
      const int64_t two_i = c - c % 2;  // the even column of the (sin, cos) pair
      const double angle = p / std::pow(10000.0, static_cast<double>(two_i) / d_model);
      pe.at({p, c}) = static_cast<float>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return pe;
}

Tensor add_positional(const Tensor& x, const Tensor& pe) {
  ATTN_CHECK(x.defined() && (x.rank() == 2 || x.rank() == 3),
             "add_positional: x must be (T, d_model) or (B, T, d_model), got ",
             x.defined() ? x.shape_string() : "undefined");
  ATTN_CHECK(pe.defined() && pe.rank() == 2 && pe.dim(1) == x.dim(-1),
             "add_positional: pe must be (max_len, ", x.dim(-1), "), got ",
             pe.defined() ? pe.shape_string() : "undefined");
  const int64_t t = x.dim(-2);
  ATTN_CHECK(t <= pe.dim(0), "add_positional: sequence length ", t, " exceeds max_len ", pe.dim(0));
  Tensor y = x.clone();
  const int64_t batch = x.rank() == 3 ? x.dim(0) : 1;
  const int64_t d = x.dim(-1);
  float* out = y.data();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < t; ++p) {
      for (int64_t c = 0; c < d; ++c) out[(b * t + p) * d + c] += pe.at({p, c});
    }
  }
  return y;
}

}  // namespace attn
