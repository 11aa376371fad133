// .npy parsing: any bytes give an array or attn::Error, never a crash, a leak or an allocation
// larger than the input promises; an array read back from the bytes write_npy makes is the same.
#include <cstdint>
#include <cstring>

#include "attn/error.hpp"
#include "attn/io.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  attn::NpyArray array;
  try {
    array = attn::parse_npy(std::string(attn::fuzz::bytes_of(data, size)), "fuzz.npy");
  } catch (const attn::Error&) {
    return 0;
  }
  const attn::Tensor& t = array.values;
  const attn::NpyArray again = attn::parse_npy(attn::npy_bytes(t), "again.npy");
  attn::fuzz::require(again.values.shape() == t.shape(), "write then read keeps the shape");
  attn::fuzz::require(std::memcmp(again.values.data(), t.data(), t.numel() * sizeof(float)) == 0,
                      "write then read keeps every value's bits");
  return 0;
}
