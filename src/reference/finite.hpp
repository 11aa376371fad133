// attn's one policy for NaN and ±inf: refused at every public entry point that takes float
// values (sdpa and its backward, multi-head attention, the layers, the KV cache), with an
// attn::Error that names the argument and the first element. Propagating them instead would
// need every kernel to agree on which rows a NaN reaches (a causal row must not see a later
// token's NaN, a masked key's NaN must not reach anyone), which the fused kernels cannot
// promise cheaply; a scan of the inputs costs O(T·d) against the attention's O(T²·d).
// Additive masks are the one exception: -inf there means "never attend" (checked apart).
#pragma once

#include "attn/tensor.hpp"

namespace attn::detail {

// attn::Error "<where>: <name> holds nan at (0, 3, 2); attn refuses NaN and ±inf in its
// inputs" (argument() == name) for the first non-finite element of `t`, in row-major order;
// nothing when `t` is undefined or finite.
void check_finite(const Tensor& t, const char* where, const char* name);

}  // namespace attn::detail
