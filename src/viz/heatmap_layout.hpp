// Where the heat-map picture puts things, in pixels: computed once from the weights' shape and
// the options, then used by the drawing and by the tests (which look for a cell's colour at
// its place). Internal to the library.
#pragma once

#include <cstdint>

#include "attn/tensor.hpp"
#include "attn/viz.hpp"

namespace attn::viz {

struct HeatmapLayout {
  int64_t grid_rows = 1, grid_cols = 1;  // panels: layers × heads
  int64_t tq = 0, tk = 0;                // the weights' own rows and columns
  int64_t factor = 1;                    // down-sampling (1 = none)
  int64_t rows = 0, cols = 0;            // cells of a panel: ceil(tq / factor), ceil(tk / factor)
  double cell = 0;                       // a cell's side
  int64_t label_step = 1;                // every label_step-th token is labelled
  double left = 0, top = 0;              // the top-left corner of panel (0, 0)
  double step_x = 0, step_y = 0;         // from a panel to its right / lower neighbour
  double legend_x = 0;                   // the colour bar's left edge (its top is `top`)
  double legend_height = 0;
  double notes_y = 0;  // the baseline of the first note line
  int width = 0, height = 0;

  double cell_x(int64_t panel_col, int64_t col) const {
    return left + static_cast<double>(panel_col) * step_x + static_cast<double>(col) * cell;
  }
  double cell_y(int64_t panel_row, int64_t row) const {
    return top + static_cast<double>(panel_row) * step_y + static_cast<double>(row) * cell;
  }
};

// attn::Error for a shape or options the picture cannot show (see heatmap_png).
HeatmapLayout heatmap_layout(const Shape& shape, const HeatmapPictureOptions& options);

}  // namespace attn::viz
