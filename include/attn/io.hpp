// .npy and safetensors files.
//
// .npy files (NumPy's format, versions 1.0 and 2.0, C order, little-endian).
//
// Reading accepts, rank 1..4: floats '<f4', '<f8' (narrowed to float32; a value beyond
// float32's range is an error), '<f2' (float16, widened exactly) and bfloat16 (widened exactly;
// numpy has no bfloat16 of its own and saves ml_dtypes' as a 2-byte void, '<V2' or '|V2', so a
// 2-byte void is read as bfloat16, as Keras does; the descr 'bfloat16' is accepted too);
// booleans '|b1' (read as 1/0); integers '|i1' '|u1' '<i2' '<u2' '<i4' '<u4' '<i8' '<u8'
// (converted to the nearest float32: exact up to 2^24 in magnitude; masks read them as
// non-zero = allowed). Everything else — Fortran order, big-endian, another dtype, a header whose
// shape disagrees with the file size, a truncated file — throws attn::Error naming the file. The
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

enum class NpyDtype {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64
};
// The dtype's family, for callers that accept only some: float data, or a mask.
bool is_floating(NpyDtype dtype);  // f2, bfloat16, f4, f8
bool is_integer(NpyDtype dtype);   // i1 … u8

struct NpyArray {
  Tensor values;   // float32 (booleans as 1.0 / 0.0)
  NpyDtype dtype;  // what the file held
};

NpyArray read_npy(const std::string& path);
// Parses an in-memory .npy image; `name` is used in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& name);

void write_npy(const std::string& path, const Tensor& t);
// The bytes write_npy writes ('<f4', version 1.0), e.g. for a stream.
std::string npy_bytes(const Tensor& t);
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
