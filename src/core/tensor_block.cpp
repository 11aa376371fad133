// See tensor_block.hpp.
#include "src/core/tensor_block.hpp"

#include <cstdint>
#include <functional>
#include <numeric>

namespace attn::detail {

std::vector<Tensor> uninitialized_in_one_block(const std::vector<Shape>& shapes) {
  constexpr int64_t kLineFloats = 16, kApart = 1024 + kLineFloats;  // a page and a line
  std::vector<int64_t> offsets;
  int64_t end = 0;
  for (const Shape& shape : shapes) {
    const int64_t start =
        offsets.empty() ? 0 : (end + kLineFloats - 1) / kLineFloats * kLineFloats + kApart;
    offsets.push_back(start);
    // (The shapes of tensors that exist: their sizes fit.)
    end = start + std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }
  const Tensor block = Tensor::uninitialized({end});
  std::vector<Tensor> views;
  for (size_t i = 0; i < shapes.size(); ++i)
    views.push_back(block.as_strided(shapes[i], contiguous_strides(shapes[i]), offsets[i]));
  return views;
}

}  // namespace attn::detail
