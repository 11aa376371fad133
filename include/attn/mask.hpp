// Masks. Causal and sliding-window masks are *specs* (flags in SdpaOptions) computed from
// indices; only an explicit user mask is a tensor.
//
// Conventions (the same as PyTorch's scaled_dot_product_attention):
//   - a boolean mask is true (non-zero) where attention is ALLOWED;
//   - an additive (float) mask is added to the scaled scores; -inf forbids a key.
//   - causal with Tq ≠ Tk is bottom-right aligned: query i sits at absolute position
//     Tk − Tq + i and sees keys j ≤ that position.
#pragma once

#include <cstdint>

#include "attn/tensor.hpp"

namespace attn {

enum class MaskKind { kNone, kBoolean, kAdditive };

// An explicit mask, broadcastable to the scores' shape (…, Tq, Tk): it is right-aligned
// against that shape and each of its dims is 1 or equal to the scores' dim.
struct Mask {
  MaskKind kind = MaskKind::kNone;
  Tensor values;  // boolean: non-zero = allowed; additive: added to the scores

  // Mask::allow(m): attend where m != 0.
  static Mask allow(Tensor allowed) { return {MaskKind::kBoolean, std::move(allowed)}; }
  // Mask::additive(b): add b to the scores (finite values or -inf; NaN and +inf are errors).
  static Mask additive(Tensor bias) { return {MaskKind::kAdditive, std::move(bias)}; }
  bool empty() const { return kind == MaskKind::kNone; }
};

// The textbook causal mask as a boolean tensor (1 = allowed): (n, n), ones on and below the
// diagonal. The two-argument form is bottom-right aligned: (tq, tk), row i allows keys
// j ≤ tk − tq + i. Throws for n, tq or tk < 1.
Tensor causal_mask(int64_t n);
Tensor causal_mask(int64_t tq, int64_t tk);

// Whether key j is visible from query i under the causal / sliding-window spec.
// window = 0 means unlimited; window = w > 0 keeps keys with p − w < j ≤ p, p = tk − tq + i.
inline bool causal_allows(int64_t i, int64_t j, int64_t tq, int64_t tk, int64_t window) {
  const int64_t position = tk - tq + i;
  return j <= position && (window == 0 || j > position - window);
}

}  // namespace attn
