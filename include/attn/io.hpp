// .npy and safetensors files.
//
// .npy files (NumPy's format, versions 1.0 and 2.0, C order, little-endian).
//
// Reading accepts '<f4' and '<f8' (converted to float32) and '|b1' (booleans, read as 1/0),
// rank 1..4. Everything else — Fortran order, big-endian, another dtype, a header whose shape
// disagrees with the file size, a truncated file — throws attn::Error naming the file. The
// payload size is checked against the file size before anything is allocated.
// Writing produces a version 1.0 '<f4' (or '|b1') file through a temporary file that is
// renamed into place, so a failed write never leaves a half-written file.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

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

// safetensors files (the Hugging Face format, read by PyTorch, JAX and numpy through the
// `safetensors` package): an 8-byte little-endian header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, …,
//    "__metadata__": {"<key>": "<string value>", …}}
// padded with spaces to a multiple of 8, then the tensors' raw little-endian bytes, offsets
// counted from the end of the header. See https://github.com/huggingface/safetensors.
//
// Reading accepts F32, F64, F16 and BF16 (converted to float32), rank 1..4. The header length,
// every dtype, shape and offset is checked against the file size before anything is
// allocated, and the tensors must tile the data exactly (no overlap, no gap), as the reference
// implementation requires; anything else throws attn::Error naming the file and the tensor.
// Writing produces F32 through a temporary file that is renamed into place.
namespace attn {

struct Safetensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;          // the "__metadata__" entries
  // The tensor called `name`; attn::Error naming it when absent.
  const Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const;
};

Safetensors read_safetensors(const std::string& path);
// Parses an in-memory file image; `name` is used in error messages.
Safetensors parse_safetensors(const std::string& bytes, const std::string& name);
// Tensor names must be unique, non-empty and not "__metadata__".
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The bytes write_safetensors would write.
std::string safetensors_image(const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace attn
