// Pictures of attention weights.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attn/tensor.hpp"

namespace attn {

struct HeatmapOptions {
  std::vector<std::string> row_labels;     // one per row (query), or empty
  std::vector<std::string> column_labels;  // one per column (key), or empty
  // Values map linearly from [vmin, vmax] onto the ramp " ▁▂▃▄▅▆▇█"; vmax defaults to the
  // largest value of the matrix (so a long row of small weights still shows its shape).
  float vmin = 0.0f;
  std::optional<float> vmax;
};

// An ASCII heat map of a (rows, cols) matrix, one text line per row, two characters per
// cell. Column labels are written vertically above the grid, row labels to its left, and a
// last line states the scale. Throws for a matrix that is not 2-D, holds NaN or ±inf, or labels of
// the wrong count.
std::string heatmap_ascii(const Tensor& matrix, const HeatmapOptions& options = {});

}  // namespace attn
