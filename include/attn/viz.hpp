// Pictures of attention weights.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attn/tensor.hpp"

namespace attn {

// How values map onto the ramp " ▁▂▃▄▅▆▇█".
//   kGlobal: [vmin, vmax], vmax defaulting to the largest value of the matrix (a long row of
//            small weights still shows its shape);
//   kRow: each row from 0 to its own largest value (a causal map's first row is always 1, which
//         otherwise leaves every later row faint);
//   kAbsolute: [0, 1], what a weight is.
enum class HeatmapScale { kGlobal, kRow, kAbsolute };

struct HeatmapOptions {
  std::vector<std::string> row_labels;     // one per row (query), or empty
  std::vector<std::string> column_labels;  // one per column (key), or empty
  HeatmapScale scale = HeatmapScale::kGlobal;
  float vmin = 0.0f;  // kGlobal only
  std::optional<float> vmax;
  // > 0: the map, row labels included, fits in this many terminal columns with the last one
  // left free (terminals wrap there): a matrix with more cells than fit is down-sampled by the
  // smallest whole factor f that fits, on both axes: each cell shows the largest value of an
  // f × f block (a thin diagonal stays visible), each label is its block's first; a note line
  // says so.
  int64_t max_width = 0;
};

// An ASCII heat map of a (rows, cols) matrix, one text line per row, two characters per
// cell. Column labels are written vertically above the grid, row labels to its left, and a
// last line states the scale (and the down-sampling, if any). Throws for a matrix that is not
// 2-D, holds NaN or ±inf, or labels of the wrong count.
std::string heatmap_ascii(const Tensor& matrix, const HeatmapOptions& options = {});
HeatmapScale heatmap_scale_from_string(const std::string& name);  // "global", "row", "absolute"

}  // namespace attn
