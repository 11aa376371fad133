// .npy files (NumPy's format, versions 1.0 and 2.0, C order, little-endian).
//
// Reading accepts '<f4' and '<f8' (converted to float32) and '|b1' (booleans, read as 1/0),
// rank 1..4. Everything else — Fortran order, big-endian, another dtype, a header whose shape
// disagrees with the file size, a truncated file — throws attn::Error naming the file. The
// payload size is checked against the file size before anything is allocated.
// Writing produces a version 1.0 '<f4' (or '|b1') file through a temporary file that is
// renamed into place, so a failed write never leaves a half-written file.
#pragma once

#include <string>

#include "attn/tensor.hpp"

namespace attn {

enum class NpyDtype { kFloat32, kFloat64, kBool };

struct NpyArray {
  Tensor values;   // float32 (booleans as 1.0 / 0.0)
  NpyDtype dtype;  // what the file held
};

NpyArray read_npy(const std::string& path);
// Parses an in-memory .npy image; `name` is used in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& name);

void write_npy(const std::string& path, const Tensor& t);
// Writes t as booleans (non-zero = true).
void write_npy_bool(const std::string& path, const Tensor& t);

}  // namespace attn
