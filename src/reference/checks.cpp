#include "src/reference/checks.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/core/memory_limit.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/kernels/reductions.hpp"
#include "src/reference/finite.hpp"

namespace attn::detail {
namespace {

std::string shapes_of(const Shape& q, const Shape& k, const Shape& v) {
  return concat("q ", to_string(q), ", k ", to_string(k), ", v ", to_string(v));
}

// dim(i) of a shape, i < 0 counting from the end.
int64_t dim_of(const Shape& s, int i) {
  return s[static_cast<size_t>(i < 0 ? i + static_cast<int>(s.size()) : i)];
}

void check_shapes(const Shape& q, const Shape& k, const Shape& v) {
  const int r = static_cast<int>(q.size());
  ATTN_CHECK(r >= 2 && r <= 4 && static_cast<int>(k.size()) == r && static_cast<int>(v.size()) == r,
             "sdpa: q, k and v must have the same rank, 2 to 4: ", shapes_of(q, k, v));
  ATTN_CHECK(dim_of(k, -1) == dim_of(q, -1), "sdpa: k's last dim (", dim_of(k, -1),
             ") must equal q's (", dim_of(q, -1), "): ", shapes_of(q, k, v));
  ATTN_CHECK(dim_of(v, -2) == dim_of(k, -2), "sdpa: v's key count (", dim_of(v, -2),
             ") must equal k's (", dim_of(k, -2), "): ", shapes_of(q, k, v));
  for (int i = 0; i < r - 2; ++i) {
    ATTN_CHECK(dim_of(k, i) == dim_of(v, i), "sdpa: k and v leading dim ", i,
               " differ: ", shapes_of(q, k, v));
    const bool head_dim = (i == r - 3);
    if (head_dim) {
      ATTN_CHECK(dim_of(q, i) % dim_of(k, i) == 0, "sdpa: k/v heads (", dim_of(k, i),
                 ") must divide q heads (", dim_of(q, i), "): ", shapes_of(q, k, v));
    } else {
      ATTN_CHECK(dim_of(q, i) == dim_of(k, i), "sdpa: q and k/v leading dim ", i,
                 " differ: ", shapes_of(q, k, v));
    }
  }
}

// NaN and +inf are refused; -inf hides a key. Read in place, over the threads: a learned (H, T,
// T) bias is read on every call (copied first, the check was most of a T = 4096 forward's time).
void check_additive_values(const Mask& mask) {
  if (mask.kind != MaskKind::kAdditive || !mask.values.defined()) return;
  const Tensor values = mask.values.is_contiguous() ? mask.values : mask.values.contiguous();
  const float* x = values.data();
  auto bad = [](float v) { return std::isnan(v) || v == std::numeric_limits<float>::infinity(); };
  std::atomic<bool> found{false};
  parallel_ranges(values.numel(), int64_t{1} << 20, [&](int64_t first, int64_t last) {
    if (kernels::any_nan_or_plus_inf(x + first, last - first))
      found.store(true, std::memory_order_relaxed);
  });
  if (!found.load()) return;
  for (int64_t i = 0; i < values.numel(); ++i) {
    ATTN_CHECK(!bad(x[i]), "sdpa: an additive mask may hold finite values or -inf, found ", x[i]);
  }
}

// key_lengths / key_starts: empty, or one key position in [0, Tk] per batch entry.
void check_key_positions(const std::vector<int64_t>& positions, const char* name, const char* one,
                         const AttentionDims& dims) {
  if (positions.empty()) return;
  ATTN_CHECK(static_cast<int64_t>(positions.size()) == dims.batch, "sdpa: ", positions.size(), " ",
             name, " for a batch of ", dims.batch);
  for (int64_t position : positions) {
    ATTN_CHECK(position >= 0 && position <= dims.tk, "sdpa: ", one, " ", position,
               " outside [0, Tk = ", dims.tk, "]");
  }
}

// alibi_slopes / sinks: empty, or one finite value per query head.
void check_per_head(const std::vector<float>& values, const char* name, int64_t heads,
                    const char* where) {
  if (values.empty()) return;
  ATTN_CHECK(static_cast<int64_t>(values.size()) == heads, where, ": ", values.size(), " ", name,
             " for ", heads, " query heads (one per head)");
  for (float x : values) {
    ATTN_CHECK(std::isfinite(x), where, ": ", name, " must be finite, found ", x);
  }
}

}  // namespace

Tensor as_rank4(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  while (shape.size() < 4) {
    shape.insert(shape.begin(), 1);
    strides.insert(strides.begin(), 0);
  }
  return t.as_strided(shape, strides);
}

Shape with_last_dim(const Shape& q, int64_t width) {
  Shape shape = q;
  shape.back() = width;
  return shape;
}

Shape with_last_dim(const Tensor& q, int64_t width) { return with_last_dim(q.shape(), width); }

AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const SdpaOptions& options) {
  ATTN_CHECK(q.defined() && k.defined() && v.defined(), "sdpa: q, k and v must all be given");
  return check_attention(q.shape(), k.shape(), v.shape(), options);
}

AttentionDims check_attention(const Shape& q, const Shape& k, const Shape& v,
                              const SdpaOptions& options) {
  check_shapes(q, k, v);
  const size_t r = q.size();  // the batch and head dims are 1 where the rank leaves them out
  AttentionDims dims{r == 4 ? q[0] : 1,
                     r >= 3 ? q[r - 3] : 1,
                     r >= 3 ? k[r - 3] : 1,
                     q[r - 2],
                     k[r - 2],
                     q[r - 1],
                     v[r - 1],
                     0.0f,
                     0};
  dims.query_position0 = causal_position(0, dims.tq, dims.tk, options.causal_align);
  dims.scale = options.scale.value_or(1.0f / std::sqrt(static_cast<float>(dims.d)));
  ATTN_CHECK(std::isfinite(dims.scale), "sdpa: scale must be finite, got ", dims.scale);
  ATTN_CHECK(options.window >= 0, "sdpa: window must be >= 0, got ", options.window);
  check_key_positions(options.key_lengths, "key_lengths", "key length", dims);
  check_key_positions(options.key_starts, "key_starts", "key start", dims);
  check_additive_values(options.mask);
  check_variants(options, dims.heads, "sdpa");
  return dims;
}

void check_variants(const SdpaOptions& options, int64_t heads, const char* where) {
  check_float_dtype(options.precision, std::string(where) + ": precision");
  ATTN_CHECK(std::isfinite(options.softcap) && options.softcap >= 0.0f, where,
             ": softcap must be finite and >= 0 (0 = off), got ", options.softcap);
  check_per_head(options.alibi_slopes, "alibi_slopes", heads, where);
  check_per_head(options.sinks, "sinks", heads, where);
}

void check_finite_qkv(const char* where, const Tensor& q, const Tensor& k, const Tensor& v) {
  check_finite(q, where, "q");
  check_finite(k, where, "k");
  check_finite(v, where, "v");
}

void check_weights_fit(const AttentionDims& dims, const Shape& weights_shape, const char* where) {
  const int64_t heads = dims.batch * dims.heads;
  const int64_t held = heads + 2 * std::min<int64_t>(num_threads(), heads);
  check_fits_in_memory(
      static_cast<double>(dims.tq) * static_cast<double>(dims.tk) * static_cast<double>(held),
      std::string(where) + ": computing the weights " + to_string(weights_shape));
}

void check_output_gradient(const Tensor& q, const AttentionDims& dims, const Tensor& d_out) {
  const Shape expected = with_last_dim(q, dims.dv);
  ATTN_CHECK(d_out.defined() && d_out.shape() == expected,
             "sdpa_backward: d_out must have the "
             "output's shape ",
             to_string(expected), ", got ", d_out.defined() ? d_out.shape_string() : "undefined");
}

Tensor broadcast_mask(const Mask& mask, const Shape& scores_shape) {
  if (mask.empty()) return Tensor{};
  const Tensor& m = mask.values;
  ATTN_CHECK(m.defined(), "sdpa: mask kind is set but the mask tensor is missing");
  const int rs = static_cast<int>(scores_shape.size());
  ATTN_CHECK(m.rank() <= rs, "sdpa: mask ", m.shape_string(), " has more dims than the scores ",
             to_string(scores_shape));
  Shape strides(rs, 0);
  for (int i = 0; i < m.rank(); ++i) {
    const int s = rs - m.rank() + i;  // right-aligned
    ATTN_CHECK(m.dim(i) == 1 || m.dim(i) == scores_shape[s], "sdpa: mask ", m.shape_string(),
               " does not broadcast to the scores ", to_string(scores_shape));
    strides[s] = m.dim(i) == 1 ? 0 : m.strides()[i];
  }
  return as_rank4(m.as_strided(scores_shape, strides));
}

}  // namespace attn::detail
