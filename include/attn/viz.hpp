// Pictures of attention weights.
#pragma once

#include <array>
#include <cstdint>
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

// An 8-bit sRGB colour.
struct Rgb {
  uint8_t r, g, b;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

// Viridis, the perceptually uniform map (dark violet -> teal -> yellow; lightness rises
// steadily, so it reads the same in grey and to the colour-blind), as 256 colours rebuilt in
// CIELAB from its quartiles (src/viz/colormap.cpp), and the colour of t in [0, 1] (clamped).
const std::array<Rgb, 256>& viridis();
Rgb viridis(float t);

// A picture of attention weights. The weights' rank says what is drawn:
//   (Tq, Tk)           one panel: rows = queries, columns = keys
//   (H, Tq, Tk)        a row of H panels, one per head
//   (L, H, Tq, Tk)     a grid: a row per layer (dim 0), a panel per head
// Each panel has its title ("layer 1 · head 3"), token labels down the left of the first column
// of panels and along the bottom of the last row (every k-th when there are too many to fit),
// a colour bar with the scale, and a note line when down-sampled.
struct HeatmapPictureOptions {
  std::vector<std::string> row_labels;     // one per query, or empty (positions are shown)
  std::vector<std::string> column_labels;  // one per key, or empty
  HeatmapScale scale = HeatmapScale::kGlobal;
  float vmin = 0.0f;          // kGlobal only
  std::optional<float> vmax;  // kGlobal only; default the largest weight of all panels
  // A longer axis is down-sampled by the smallest whole factor f that fits: each cell is the
  // largest value of an f × f block (a thin diagonal stays visible), the note says so.
  int64_t max_cells = 128;
  int64_t cell_pixels = 0;  // 0: chosen from the panel's size (a single panel is larger)
  std::string title;        // above everything, or none
  std::string grid_row_name = "layer";  // what dim 0 of 4-D weights is, in the panel titles
};

// The picture as a PNG image (drawn by cairo) or an SVG document (labels as <text>). Throws
// attn::Error for weights of another rank or with an empty dim, NaN or ±inf, labels of the
// wrong count, options out of range, or a picture over 16384 pixels a side.
std::string heatmap_png(const Tensor& weights, const HeatmapPictureOptions& options = {});
std::string heatmap_svg(const Tensor& weights, const HeatmapPictureOptions& options = {});

// The attention explorer: one self-contained HTML page (its style, script and data inline;
// nothing fetched, so it opens offline from a file:// URL) with every head as a small heat map
// (rows = layers), and the head that is clicked, or reached with the arrow keys, as a head view
// (lines from each query token to its keys, opacity = weight; pointing at a token shows its
// lines alone) and as a large heat map that names the weight under the pointer.
struct ExplorerOptions {
  std::string title = "Attention";
  std::string subtitle;                 // a line under the title (the model, the text)
  std::string grid_row_name = "layer";  // what dim 0 of 4-D weights is
};

// weights (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk); tokens: one per key, as the tokenizer
// displays them (the queries are the last Tq). attn::Error for another rank, NaN or ±inf, a
// token count other than Tk, Tq > Tk, or more than 2²⁴ weights (a page of 64 MiB or more).
std::string explorer_html(const Tensor& weights, const std::vector<std::string>& tokens,
                          const ExplorerOptions& options = {});

// What a training run's report shows (attn train writes it as DIR/report.html at each
// evaluation).
struct TrainingReport {
  struct Step {
    int64_t iter;
    float loss, lr;
    double tokens_per_s;
  };
  struct Evaluation {
    int64_t iter;
    float train_loss, val_loss;
  };
  std::string title = "Training report";
  std::vector<Step> steps;
  std::vector<Evaluation> evaluations;
  std::vector<std::pair<int64_t, float>> schedule;  // the planned learning rate, (iter, lr)
  std::vector<std::pair<std::string, std::string>> configuration;  // (name, value) rows
  std::string sample;       // text the model generated at the last evaluation
  std::string sample_note;  // how it was drawn
  std::string written;      // when, as the page should say it
};

// One self-contained HTML page: the loss curves (the batch loss of each step, the evaluated
// train and validation losses; axis labels, a legend, a log-scale toggle), the learning-rate
// schedule and the rates used, tokens/s, the sample and the configuration. Non-finite values
// are left out of the charts (JSON has no NaN).
std::string training_report_html(const TrainingReport& report);

}  // namespace attn
