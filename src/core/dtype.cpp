// attn::Dtype's names (attn/dtype.hpp).
#include "attn/dtype.hpp"

#include "attn/error.hpp"

namespace attn {

std::string to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::kBFloat16:
      return "bf16";
    case Dtype::kQ8:
      return "q8";
    case Dtype::kFloat32:
      break;
  }
  return "f32";
}

Dtype dtype_from_string(std::string_view name, std::string_view what) {
  if (name == "f32") return Dtype::kFloat32;
  if (name == "bf16") return Dtype::kBFloat16;
  if (name == "q8") return Dtype::kQ8;
  throw Error(detail::concat(what, " must be \"f32\", \"bf16\" or \"q8\", got \"", name, "\""));
}

Dtype float_dtype_from_string(std::string_view name, std::string_view what) {
  if (name == "f32") return Dtype::kFloat32;
  if (name == "bf16") return Dtype::kBFloat16;
  throw Error(detail::concat(what, " must be \"f32\" or \"bf16\", got \"", name, "\""));
}

void check_float_dtype(Dtype dtype, std::string_view what) {
  ATTN_CHECK(dtype == Dtype::kFloat32 || dtype == Dtype::kBFloat16, what,
             ": q8 is a KV cache storage, not a number format to compute in");
}

}  // namespace attn
