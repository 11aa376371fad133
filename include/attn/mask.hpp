// Masks. Causal and sliding-window masks are *specs* (flags in SdpaOptions) computed from
// indices; only an explicit user mask is a tensor.
//
// Conventions (the same as PyTorch's scaled_dot_product_attention):
//   - a boolean mask is true (non-zero) where attention is ALLOWED;
//   - an additive (float) mask is added to the scaled scores; -inf forbids a key.
//   - causal with Tq ≠ Tk is bottom-right aligned by default: query i sits at absolute
//     position Tk − Tq + i and sees keys j ≤ that position (what a KV cache needs: the last
//     query sees every key). PyTorch's is_causal is top-left aligned instead (query i at
//     position i, torch.tril(ones(Tq, Tk))); CausalAlign::kTopLeft gives that.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "attn/tensor.hpp"

namespace attn {

enum class MaskKind { kNone, kBoolean, kAdditive };

// Where the queries of a causal (or sliding-window) mask sit when Tq ≠ Tk; the same when
// Tq = Tk. kBottomRight: query i at position Tk − Tq + i. kTopLeft: query i at position i.
enum class CausalAlign { kBottomRight, kTopLeft };
std::string to_string(CausalAlign align);                     // "bottom-right", "top-left"
CausalAlign causal_align_from_string(std::string_view name);  // attn::Error otherwise

// The absolute position of query i of tq against tk keys.
inline int64_t causal_position(int64_t i, int64_t tq, int64_t tk, CausalAlign align) {
  return align == CausalAlign::kTopLeft ? i : tk - tq + i;
}

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
// diagonal. The two-argument form is (tq, tk), row i allowing keys j ≤ causal_position(i):
// bottom-right aligned by default (j ≤ tk − tq + i), top-left with kTopLeft (j ≤ i).
// Throws for n, tq or tk < 1.
Tensor causal_mask(int64_t n);
Tensor causal_mask(int64_t tq, int64_t tk, CausalAlign align = CausalAlign::kBottomRight);

// Whether key j is visible from query i under the causal / sliding-window spec.
// window = 0 means unlimited; window = w > 0 keeps keys with p − w < j ≤ p,
// p = causal_position(i, tq, tk, align).
inline bool causal_allows(int64_t i, int64_t j, int64_t tq, int64_t tk, int64_t window,
                          CausalAlign align = CausalAlign::kBottomRight) {
  const int64_t position = causal_position(i, tq, tk, align);
  return j <= position && (window == 0 || j > position - window);
}

}  // namespace attn
