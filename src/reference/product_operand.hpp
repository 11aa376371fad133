// SdpaOptions::precision in the reference path: the operands of attention's products as the
// chosen precision gives them — unchanged for kFloat32, every value rounded to the nearest
// bfloat16 (kept as a float) for kBFloat16. The fused kernels round at the same places.
#pragma once

#include "attn/dtype.hpp"
#include "attn/tensor.hpp"

namespace attn::detail {

Tensor product_operand(const Tensor& t, Dtype precision);

}  // namespace attn::detail
