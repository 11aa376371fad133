// Down-sampling shared by the heat maps: a matrix too large to show is shown by f × f blocks,
// each the largest value of its block (a thin diagonal stays visible where a mean would fade
// it), each labelled by its first label. Internal to the library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace attn::viz {

// The ceil(rows / f) × ceil(cols / f) block maxima of a row-major (rows, cols) matrix.
inline std::vector<float> max_pool(const float* values, int64_t rows, int64_t cols, int64_t f) {
  const int64_t pooled_cols = (cols + f - 1) / f;
  std::vector<float> pooled(static_cast<size_t>(((rows + f - 1) / f) * pooled_cols), -INFINITY);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& cell = pooled[static_cast<size_t>((r / f) * pooled_cols + c / f)];
      cell = std::max(cell, values[r * cols + c]);
    }
  }
  return pooled;
}

// Labels 0, f, 2f, …: the first of each block.
inline std::vector<std::string> every_fth(const std::vector<std::string>& labels, int64_t f) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < labels.size(); i += static_cast<size_t>(f)) kept.push_back(labels[i]);
  return kept;
}

}  // namespace attn::viz
