#include "attn/mask.hpp"

#include "attn/error.hpp"

namespace attn {

Tensor causal_mask(int64_t n) { return causal_mask(n, n); }

Tensor causal_mask(int64_t tq, int64_t tk, CausalAlign align) {
  ATTN_CHECK(tq >= 1 && tk >= 1, "causal_mask: sizes must be >= 1, got (", tq, ", ", tk, ")");
  Tensor mask({tq, tk});
  for (int64_t i = 0; i < tq; ++i) {
    for (int64_t j = 0; j < tk; ++j) {
      mask.at({i, j}) = causal_allows(i, j, tq, tk, 0, align) ? 1.f : 0.f;
    }
  }
  return mask;
}

std::string to_string(CausalAlign align) {
  return align == CausalAlign::kTopLeft ? "top-left" : "bottom-right";
}

CausalAlign causal_align_from_string(std::string_view name) {
  if (name == "bottom-right") return CausalAlign::kBottomRight;
  if (name == "top-left") return CausalAlign::kTopLeft;
  throw Error(detail::concat("causal alignment must be bottom-right or top-left, got '",
                             detail::excerpt(name), "'"));
}

}  // namespace attn
