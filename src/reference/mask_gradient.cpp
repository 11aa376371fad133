#include "src/reference/mask_gradient.hpp"

#include <vector>

#include "attn/error.hpp"

namespace attn::detail {

void check_mask_gradient_request(const SdpaOptions& options, const char* where) {
  if (!options.return_mask_gradient) return;
  ATTN_CHECK(!options.mask.empty() && options.mask.kind == MaskKind::kAdditive, where,
             ": return_mask_gradient needs an additive (float) mask; a boolean mask, causal or "
             "padding has no gradient");
}

namespace {

// The bytes a view reaches, first to last element: two views overlap when these ranges do
// (storage identity alone misses two views made over one caller's memory, as Python's are).
struct Extent {
  const char *first, *last;
};
Extent extent_of(const Tensor& t) {
  int64_t low = 0, high = 0;
  for (int i = 0; i < t.rank(); ++i) {
    const int64_t reach = (t.dim(i) - 1) * t.strides()[static_cast<size_t>(i)];
    (reach < 0 ? low : high) += reach;
  }
  const auto* base = reinterpret_cast<const char*>(t.data());
  return {base + low * static_cast<int64_t>(sizeof(float)),
          base + high * static_cast<int64_t>(sizeof(float)) + sizeof(float) - 1};
}
bool memory_overlaps(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.numel() == 0 || b.numel() == 0) return false;
  const Extent x = extent_of(a), y = extent_of(b);
  return x.first <= y.last && y.first <= x.last;
}

}  // namespace

void check_mask_gradient_buffer(const Tensor& dmask, const SdpaOptions& options,
                                std::initializer_list<const Tensor*> inputs) {
  const Tensor& mask = options.mask.values;
  ATTN_CHECK(dmask.shape() == mask.shape() && dmask.is_contiguous(),
             "sdpa_backward: dmask must be a contiguous tensor of the mask's shape ",
             mask.shape_string(), ", got ", dmask.shape_string(),
             dmask.is_contiguous() ? "" : " (not contiguous)");
  ATTN_CHECK(!memory_overlaps(dmask, mask),
             "sdpa_backward: dmask shares memory with the mask, which the backward reads");
  for (const Tensor* input : inputs) {
    ATTN_CHECK(!memory_overlaps(dmask, *input),
               "sdpa_backward: dmask shares memory with an input (q, k, v, out, logsumexp or "
               "d_out), which the backward reads");
  }
}

Tensor reduce_to_mask_shape(const Tensor& score_gradient, const Mask& mask) {
  const Tensor& m = mask.values;
  // As many elements: nothing is broadcast (the shapes differ at most by leading 1s).
  if (m.numel() == score_gradient.numel()) return score_gradient.reshape(m.shape());
  // Each score's element index → the mask element it was added from: right-aligned dims,
  // index 0 along the mask's size-1 (broadcast) dims.
  const Shape& full = score_gradient.shape();
  const int rank = static_cast<int>(full.size()), offset = rank - m.rank();
  Shape mask_stride(full.size(), 0);
  int64_t stride = 1;
  for (int i = m.rank() - 1; i >= 0; --i) {
    mask_stride[static_cast<size_t>(offset + i)] = m.dim(i) == 1 ? 0 : stride;
    stride *= m.dim(i);
  }
  std::vector<double> sums(static_cast<size_t>(m.numel()), 0.0);
  const float* g = score_gradient.data();
  std::vector<int64_t> index(full.size(), 0);
  for (int64_t flat = 0; flat < score_gradient.numel(); ++flat) {
    int64_t target = 0;
    for (int d = 0; d < rank; ++d)
      target += index[static_cast<size_t>(d)] * mask_stride[static_cast<size_t>(d)];
    sums[static_cast<size_t>(target)] += g[flat];
    for (int d = rank - 1; d >= 0; --d) {  // the next index, last dim fastest
      if (++index[static_cast<size_t>(d)] < full[static_cast<size_t>(d)]) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
  Tensor out(m.shape());
  for (size_t i = 0; i < sums.size(); ++i) out.data()[i] = static_cast<float>(sums[i]);
  return out;
}

}  // namespace attn::detail
