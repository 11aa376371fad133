// The number formats attn stores and multiplies in: one enum for every place a caller chooses
// one (a KVCache's storage, a Gpt's matrices, the operands of a matrix product), with one
// spelling in C++ ("f32", "bf16" through to_string / dtype_from_string), in Python and in the
// CLI's flags.
#pragma once

#include <string>
#include <string_view>

namespace attn {

// float32; bfloat16 — the top 16 bits of a float: the same exponent range, 8 significant bits,
// half the bytes; q8 — a KV cache's storage only: each row of d values as int8 with one float
// scale (max |x| / 127, rounded to nearest), about a quarter of float's bytes.
enum class Dtype { kFloat32, kBFloat16, kQ8 };

std::string to_string(Dtype dtype);  // "f32", "bf16", "q8"
// "f32", "bf16" or "q8"; otherwise attn::Error: "<what> must be "f32", "bf16" or "q8", got
// "<name>"".
Dtype dtype_from_string(std::string_view name, std::string_view what = "dtype");
// For the places that compute in the format (weights, matrix products): "f32" or "bf16",
// otherwise attn::Error: "<what> must be "f32" or "bf16", got "<name>"".
Dtype float_dtype_from_string(std::string_view name, std::string_view what);
// Throws attn::Error "<what>: q8 is a KV cache storage, not a number format to compute in"
// unless dtype is f32 or bf16.
void check_float_dtype(Dtype dtype, std::string_view what);

// The names each use had before the one enum, kept for one release (docs/library.md).
using CacheDtype = Dtype;
using WeightsDtype = Dtype;
using MatmulPrecision = Dtype;
inline Dtype weights_dtype_from_string(std::string_view name) {
  return float_dtype_from_string(name, "weights");
}
inline Dtype matmul_precision_from_string(std::string_view name) {
  return float_dtype_from_string(name, "precision");
}

}  // namespace attn
