// The checks every reader of a stored model makes (stored_model.hpp).
#include "src/nn/stored_model.hpp"

#include <cmath>

#include "attn/error.hpp"

namespace attn {

void detail::check_file_holds(const Safetensors& file, const GptConfig& config, int64_t copies,
                              const std::string& prefix) {
  int64_t stored = 0;
  for (const auto& entry : file.tensors) stored += entry.second.numel();
  const int64_t needed = parameter_count(config);
  ATTN_CHECK(stored / copies >= needed, prefix, "the config needs ", copies, " × ", needed,
             " floats but the file holds ", stored);
}

const Tensor& detail::checked_parameter(const Tensor* stored, const std::string& name,
                                        const GptParameter& p, const std::string& prefix) {
  ATTN_CHECK(stored != nullptr, prefix, "tensor \"", name, "\" is missing");
  ATTN_CHECK(stored->shape() == p.shape, prefix, "tensor \"", name, "\" is ",
             stored->shape_string(), ", the config needs ", to_string(p.shape));
  const float* values = stored->data();
  for (int64_t i = 0; i < stored->numel(); ++i) {
    ATTN_CHECK(std::isfinite(values[i]), prefix, "tensor \"", name, "\" holds ", values[i],
               " at flat index ", i, "; every stored value must be finite");
  }
  return *stored;
}

}  // namespace attn
