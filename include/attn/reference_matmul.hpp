// Matrix products of the reference path: plain loops, double accumulation.
#pragma once

#include "attn/tensor.hpp"

namespace attn::reference {

// (M, K)·(K, N) -> (M, N); either operand may be any strided view (e.g. a transpose).
Tensor matmul(const Tensor& a, const Tensor& b);

// X·W with the textbook convention: x (…, d_in), w (d_in, d_out) -> (…, d_out).
Tensor linear(const Tensor& x, const Tensor& w);

}  // namespace attn::reference
