// The number formats attn stores and multiplies in: one enum for every place a caller chooses
// one (a KVCache's storage, a Gpt's matrices, the operands of a matrix product), with one
// spelling in C++ ("f32", "bf16" through to_string / dtype_from_string), in Python and in the
// CLI's flags.
#pragma once

#include <string>
#include <string_view>

namespace attn {

// float32, or bfloat16 — the top 16 bits of a float: the same exponent range, 8 significant
// bits, half the bytes.
enum class Dtype { kFloat32, kBFloat16 };

std::string to_string(Dtype dtype);  // "f32", "bf16"
// "f32" or "bf16"; otherwise attn::Error: "<what> must be "f32" or "bf16", got "<name>"".
Dtype dtype_from_string(std::string_view name, std::string_view what = "dtype");

// The names each use had before the one enum, kept for one release (docs/library.md).
using CacheDtype = Dtype;
using WeightsDtype = Dtype;
using MatmulPrecision = Dtype;
inline Dtype weights_dtype_from_string(std::string_view name) {
  return dtype_from_string(name, "weights");
}
inline Dtype matmul_precision_from_string(std::string_view name) {
  return dtype_from_string(name, "precision");
}

}  // namespace attn
