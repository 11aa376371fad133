#include "src/reference/product_operand.hpp"

#include "attn/bfloat16.hpp"

namespace attn::detail {

Tensor product_operand(const Tensor& t, Dtype precision) {
  if (precision != Dtype::kBFloat16) return t;
  Tensor rounded = t.clone();
  float* x = rounded.data();
  for (int64_t i = 0; i < rounded.numel(); ++i) x[i] = from_bfloat16(to_bfloat16(x[i]));
  return rounded;
}

}  // namespace attn::detail
