// attn::Dtype's names (attn/dtype.hpp).
#include "attn/dtype.hpp"

#include "attn/error.hpp"

namespace attn {

std::string to_string(Dtype dtype) { return dtype == Dtype::kBFloat16 ? "bf16" : "f32"; }

Dtype dtype_from_string(std::string_view name, std::string_view what) {
  if (name == "f32") return Dtype::kFloat32;
  if (name == "bf16") return Dtype::kBFloat16;
  throw Error(detail::concat(what, " must be \"f32\" or \"bf16\", got \"", name, "\""));
}

}  // namespace attn
