// The reference scaled dot-product attention, step by step as in the textbook:
//   scores  = Q·Kᵀ · scale            (Tq, Tk)
//   scores += mask                    (-inf where a key is not allowed)
//   weights = softmax(scores)         rows sum to 1 (or are all 0 when nothing is allowed)
//   output  = weights · V             (Tq, dv)
// Every (batch, head) pair is one independent problem of 2-D matrices.
#include "attn/sdpa.hpp"

#include <cmath>
#include <limits>

#include "attn/error.hpp"
#include "attn/matmul.hpp"
#include "attn/threads.hpp"

namespace attn {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Sizes of one attention problem viewed as (B, H, T, d).
struct Dims {
  int64_t batch, heads, kv_heads, tq, tk, d, dv;
};

// A rank-2..4 tensor viewed as rank 4 by prepending size-1 dims (no copy).
Tensor as_rank4(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  while (shape.size() < 4) {
    shape.insert(shape.begin(), 1);
    strides.insert(strides.begin(), 0);
  }
  return t.as_strided(shape, strides);
}

std::string shapes_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  return detail::concat("q ", q.shape_string(), ", k ", k.shape_string(), ", v ", v.shape_string());
}

Dims check_shapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  ATTN_CHECK(q.defined() && k.defined() && v.defined(), "sdpa: q, k and v must all be given");
  const int r = q.rank();
  ATTN_CHECK(r >= 2 && k.rank() == r && v.rank() == r,
             "sdpa: q, k and v must have the same rank, 2 to 4: ", shapes_of(q, k, v));
  ATTN_CHECK(k.dim(-1) == q.dim(-1), "sdpa: k's last dim (", k.dim(-1), ") must equal q's (",
             q.dim(-1), "): ", shapes_of(q, k, v));
  ATTN_CHECK(v.dim(-2) == k.dim(-2), "sdpa: v's key count (", v.dim(-2), ") must equal k's (",
             k.dim(-2), "): ", shapes_of(q, k, v));
  for (int i = 0; i < r - 2; ++i) {
    ATTN_CHECK(k.dim(i) == v.dim(i), "sdpa: k and v leading dim ", i,
               " differ: ", shapes_of(q, k, v));
    const bool head_dim = (i == r - 3);
    if (head_dim) {
      ATTN_CHECK(q.dim(i) % k.dim(i) == 0, "sdpa: k/v heads (", k.dim(i), ") must divide q heads (",
                 q.dim(i), "): ", shapes_of(q, k, v));
    } else {
      ATTN_CHECK(q.dim(i) == k.dim(i), "sdpa: q and k/v leading dim ", i,
                 " differ: ", shapes_of(q, k, v));
    }
  }
  const Tensor q4 = as_rank4(q), k4 = as_rank4(k);
  return {q4.dim(0), q4.dim(1), k4.dim(1), q.dim(-2), k.dim(-2), q.dim(-1), v.dim(-1)};
}

// The explicit mask as a (B, H, Tq, Tk) view: broadcast dims get stride 0.
Tensor broadcast_mask(const Mask& mask, const Shape& scores_shape) {
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

void check_additive_values(const Mask& mask) {
  if (mask.kind != MaskKind::kAdditive) return;
  for (float x : mask.values.to_vector()) {
    ATTN_CHECK(!std::isnan(x) && x != std::numeric_limits<float>::infinity(),
               "sdpa: an additive mask may hold finite values or -inf, found ", x);
  }
}

// scores = Q·Kᵀ · scale
Tensor scaled_scores(const Tensor& q, const Tensor& k, float scale) {
  Tensor scores = reference::matmul(q, k.transpose(0, 1));
  float* s = scores.data();
  for (int64_t i = 0; i < scores.numel(); ++i) s[i] *= scale;
  return scores;
}

// scores[i][j] = -inf where the causal (or sliding-window) spec hides key j from query i.
void apply_causal(Tensor& scores, int64_t window) {
  const int64_t tq = scores.dim(0), tk = scores.dim(1);
  for (int64_t i = 0; i < tq; ++i) {
    for (int64_t j = 0; j < tk; ++j) {
      if (!causal_allows(i, j, tq, tk, window)) scores.at({i, j}) = kMinusInf;
    }
  }
}

// Boolean: -inf where the mask is false. Additive: scores += mask.
void apply_mask(Tensor& scores, const Tensor& mask, MaskKind kind) {
  for (int64_t i = 0; i < scores.dim(0); ++i) {
    for (int64_t j = 0; j < scores.dim(1); ++j) {
      const float m = mask.at({i, j});
      float& s = scores.at({i, j});
      if (kind == MaskKind::kBoolean) {
        if (m == 0.0f) s = kMinusInf;
      } else {
        s += m;
      }
    }
  }
}

}  // namespace

namespace reference {

SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  const Dims dims = check_shapes(q, k, v);
  const float scale = options.scale.value_or(1.0f / std::sqrt(static_cast<float>(dims.d)));
  ATTN_CHECK(std::isfinite(scale), "sdpa: scale must be finite, got ", scale);
  ATTN_CHECK(options.window >= 0, "sdpa: window must be >= 0, got ", options.window);

  Shape weights_shape = q.shape();
  weights_shape.back() = dims.tk;
  Shape output_shape = q.shape();
  output_shape.back() = dims.dv;
  Tensor mask4;
  if (!options.mask.empty()) {
    check_additive_values(options.mask);
    mask4 = broadcast_mask(options.mask, weights_shape);
  }

  SdpaResult result{Tensor(output_shape), Tensor(weights_shape)};
  const Tensor q4 = as_rank4(q), k4 = as_rank4(k), v4 = as_rank4(v);
  const Tensor out4 = as_rank4(result.output), weights4 = as_rank4(result.weights);
  const int64_t group = dims.heads / dims.kv_heads;  // query heads per K/V head

  parallel_for(dims.batch * dims.heads, [&](int64_t bh) {
    const int64_t b = bh / dims.heads, h = bh % dims.heads, kv_h = h / group;
    Tensor scores = scaled_scores(q4.select(b).select(h), k4.select(b).select(kv_h), scale);
    if (options.causal || options.window > 0) apply_causal(scores, options.window);
    if (mask4.defined()) apply_mask(scores, mask4.select(b).select(h), options.mask.kind);
    const Tensor weights = softmax(scores);
    const Tensor output = matmul(weights, v4.select(b).select(kv_h));
    weights4.select(b).select(h).copy_from(weights);
    out4.select(b).select(h).copy_from(output);
  });
  return result;
}

}  // namespace reference

SdpaResult sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options) {
  return reference::sdpa(q, k, v, options);
}

}  // namespace attn
