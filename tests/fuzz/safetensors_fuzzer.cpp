// safetensors parsing: any bytes give tensors or attn::Error; what was read writes back to an
// image that reads as the same names, shapes, values and metadata.
#include <cstdint>
#include <cstring>

#include "attn/error.hpp"
#include "attn/io.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attn::Safetensors file;
  try {
    file = attn::parse_safetensors(std::string(attn::fuzz::bytes_of(data, size)), "fuzz");
  } catch (const attn::Error&) {
    return 0;
  }
  std::string image;
  try {
    image = attn::safetensors_image(file.tensors, file.metadata);
  } catch (const attn::Error&) {
    return 0;  // e.g. a name the writer refuses (empty); reading it was still safe
  }
  const attn::Safetensors again = attn::parse_safetensors(image, "again");
  attn::fuzz::require(again.metadata == file.metadata, "the metadata survives a round trip");
  attn::fuzz::require(again.tensors.size() == file.tensors.size(), "every tensor survives");
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const attn::Tensor& a = file.tensors[i].second;
    const attn::Tensor& b = again.at(file.tensors[i].first);
    attn::fuzz::require(a.shape() == b.shape(), "a tensor keeps its shape");
    attn::fuzz::require(std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0,
                        "a tensor keeps its values");
  }
  return 0;
}
