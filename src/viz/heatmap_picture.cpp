// The heat-map picture: a grid of panels (layers × heads), token labels on the outer edges, a
// colour bar, notes. The layout is computed first (heatmap_layout), then painted on a Canvas,
// the same for PNG and SVG.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attn/error.hpp"
#include "src/viz/canvas.hpp"
#include "src/viz/down_sample.hpp"
#include "src/viz/heatmap_layout.hpp"

namespace attn {
namespace viz {
namespace {

constexpr double kMargin = 12, kGap = 14, kLabelSize = 11, kTitleSize = 15, kPanelTitle = 16;
constexpr double kNoteLine = 15, kLegendGap = 18, kLegendBar = 14, kLegendText = 56;
constexpr size_t kLabelChars = 12;  // longer labels are cut, with "…"
constexpr double kMaxSide = 16384;
const Rgb kFrame{0x99, 0x99, 0x99}, kGrey{0x55, 0x55, 0x55};

// Width of text in DejaVu Sans, estimated (the SVG has no font to measure with).
double text_width(size_t chars, double size) { return 0.62 * size * static_cast<double>(chars); }

size_t code_point_count(const std::string& s) {
  size_t n = 0;
  for (const char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

std::string shorten(const std::string& label) {
  const std::string clean = valid_utf8(label);
  if (code_point_count(clean) <= kLabelChars) return clean;
  size_t end = 0, kept = 0;
  while (end < clean.size() && kept < kLabelChars - 1) {
    ++end;
    while (end < clean.size() && (static_cast<unsigned char>(clean[end]) & 0xC0) == 0x80) ++end;
    ++kept;
  }
  return clean.substr(0, end) + "…";
}

// The labels a picture shows along an axis of n positions: the given ones (or the positions
// 0 … n − 1), cut to kLabelChars, one per block.
std::vector<std::string> axis_labels(const std::vector<std::string>& given, int64_t n, int64_t f) {
  std::vector<std::string> labels;
  for (int64_t i = 0; i < n; ++i) {
    labels.push_back(given.empty() ? std::to_string(i) : shorten(given[static_cast<size_t>(i)]));
  }
  return every_fth(labels, f);
}

size_t widest(const std::vector<std::string>& labels) {
  size_t w = 0;
  for (const auto& l : labels) w = std::max(w, code_point_count(l));
  return w;
}

std::string format_value(float v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", static_cast<double>(v));
  return buffer;
}

std::vector<std::string> notes(const HeatmapLayout& l, const HeatmapPictureOptions& o) {
  const char* scale = o.scale == HeatmapScale::kRow        ? "each row from 0 to its own largest"
                      : o.scale == HeatmapScale::kAbsolute ? "0 to 1"
                                                           : "one scale for every panel";
  std::vector<std::string> lines = {std::string("rows: queries, columns: keys; colour: ") + scale};
  if (l.factor > 1) {
    lines.push_back("down-sampled " + std::to_string(l.factor) +
                    "x: each cell is the largest weight of a " + std::to_string(l.factor) + " x " +
                    std::to_string(l.factor) + " block of the " + std::to_string(l.tq) + " x " +
                    std::to_string(l.tk) + " weights");
  }
  if (l.label_step > 1) {
    lines.push_back("one label in " + std::to_string(l.label_step) + " shown");
  }
  return lines;
}

void check(const Shape& shape, const HeatmapPictureOptions& o) {
  const int rank = static_cast<int>(shape.size());
  ATTN_CHECK(rank >= 2 && rank <= 4,
             "picture: weights must be (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk), got ",
             to_string(shape));
  for (const int64_t d : shape) {
    ATTN_CHECK(d >= 1, "picture: weights ", to_string(shape), " have an empty dim");
  }
  const int64_t tq = shape[static_cast<size_t>(rank - 2)], tk = shape.back();
  ATTN_CHECK(o.row_labels.empty() || static_cast<int64_t>(o.row_labels.size()) == tq,
             "picture: ", o.row_labels.size(), " row labels for ", tq, " queries");
  ATTN_CHECK(o.column_labels.empty() || static_cast<int64_t>(o.column_labels.size()) == tk,
             "picture: ", o.column_labels.size(), " column labels for ", tk, " keys");
  ATTN_CHECK(o.max_cells >= 1, "picture: max_cells must be >= 1, got ", o.max_cells);
  ATTN_CHECK(o.cell_pixels >= 0 && o.cell_pixels <= 64,
             "picture: cell_pixels must be in [0, 64], got ", o.cell_pixels);
}

}  // namespace

HeatmapLayout heatmap_layout(const Shape& shape, const HeatmapPictureOptions& o) {
  check(shape, o);
  HeatmapLayout l;
  const int rank = static_cast<int>(shape.size());
  l.grid_rows = rank == 4 ? shape[0] : 1;
  l.grid_cols = rank >= 3 ? shape[static_cast<size_t>(rank - 3)] : 1;
  l.tq = shape[static_cast<size_t>(rank - 2)];
  l.tk = shape.back();
  const int64_t longest = std::max(l.tq, l.tk);
  l.factor = longest > o.max_cells ? (longest + o.max_cells - 1) / o.max_cells : 1;
  l.rows = (l.tq + l.factor - 1) / l.factor;
  l.cols = (l.tk + l.factor - 1) / l.factor;
  const bool single = l.grid_rows * l.grid_cols == 1;
  const int64_t n = std::max(l.rows, l.cols);
  l.cell = o.cell_pixels > 0 ? static_cast<double>(o.cell_pixels)
           : single          ? std::clamp<double>(std::floor(512.0 / n), 4, 32)
                             : std::clamp<double>(std::floor(200.0 / n), 2, 16);
  l.label_step = static_cast<int64_t>(std::ceil((kLabelSize + 1) / l.cell));

  const double row_label_width =
      text_width(widest(axis_labels(o.row_labels, l.tq, l.factor)), kLabelSize) + 6;
  const double column_label_height =
      text_width(widest(axis_labels(o.column_labels, l.tk, l.factor)), kLabelSize) + 6;
  const double panel_w = l.cell * static_cast<double>(l.cols);
  const double panel_h = l.cell * static_cast<double>(l.rows);
  const double title_h = o.title.empty() ? 0 : kTitleSize + 10;
  const double panel_title_h = single ? 0 : kPanelTitle;
  l.left = kMargin + row_label_width;
  l.top = kMargin + title_h + panel_title_h;
  l.step_x = panel_w + kGap;
  l.step_y = panel_h + kGap + panel_title_h;
  const double grid_w = l.step_x * static_cast<double>(l.grid_cols) - kGap;
  const double grid_h = l.step_y * static_cast<double>(l.grid_rows) - kGap - panel_title_h;
  l.legend_x = l.left + grid_w + kLegendGap;
  l.legend_height = std::max(std::min(grid_h, 240.0), 80.0);
  const double body_bottom =
      std::max(l.top + grid_h + column_label_height, l.top + l.legend_height + kLabelSize);
  l.notes_y = body_bottom + kNoteLine;
  const std::vector<std::string> lines = notes(l, o);
  size_t widest_note = code_point_count(o.title) * 15 / 11;
  for (const auto& line : lines) widest_note = std::max(widest_note, code_point_count(line));
  const double width = std::max(l.legend_x + kLegendBar + kLegendText + kMargin,
                                2 * kMargin + text_width(widest_note, kLabelSize));
  const double height = l.notes_y + kNoteLine * static_cast<double>(lines.size() - 1) + kMargin;
  ATTN_CHECK(width <= kMaxSide && height <= kMaxSide, "picture: ", std::lround(width), " x ",
             std::lround(height), " pixels is too large (at most ", kMaxSide,
             " a side): fewer panels, a smaller max_cells or cell_pixels");
  l.width = static_cast<int>(std::ceil(width));
  l.height = static_cast<int>(std::ceil(height));
  return l;
}

namespace {

// Maps a panel's values to [0, 1] under the scale.
struct Scale {
  HeatmapScale kind;
  float vmin, vmax;
  float unit(float v, float row_max) const {
    const float lo = kind == HeatmapScale::kGlobal ? vmin : 0.0f;
    const float hi = kind == HeatmapScale::kRow        ? row_max
                     : kind == HeatmapScale::kAbsolute ? 1.0f
                                                       : vmax;
    if (!(hi > lo)) return v > lo ? 1.0f : 0.0f;
    return std::clamp((v - lo) / (hi - lo), 0.0f, 1.0f);
  }
};

// One panel's cells, a horizontal run of equal colours drawn as one rectangle (the causal
// triangle's zeros then cost one element per row, not one per cell).
void draw_panel(Canvas& canvas, const HeatmapLayout& l, int64_t pr, int64_t pc,
                const std::vector<float>& cells, const Scale& scale) {
  for (int64_t r = 0; r < l.rows; ++r) {
    const float* row = cells.data() + r * l.cols;
    const float row_max = *std::max_element(row, row + l.cols);
    int64_t start = 0;
    Rgb run = viridis(scale.unit(row[0], row_max));
    for (int64_t c = 1; c <= l.cols; ++c) {
      const Rgb next = c < l.cols ? viridis(scale.unit(row[c], row_max)) : Rgb{};
      if (c < l.cols && next == run) continue;
      canvas.fill_rect(l.cell_x(pc, start), l.cell_y(pr, r),
                       l.cell * static_cast<double>(c - start), l.cell, run);
      start = c;
      run = next;
    }
  }
  canvas.outline_rect(l.cell_x(pc, 0) - 1, l.cell_y(pr, 0) - 1,
                      l.cell * static_cast<double>(l.cols) + 2,
                      l.cell * static_cast<double>(l.rows) + 2, kFrame);
}

void draw_labels(Canvas& canvas, const HeatmapLayout& l, const HeatmapPictureOptions& o) {
  const std::vector<std::string> rows = axis_labels(o.row_labels, l.tq, l.factor);
  const std::vector<std::string> cols = axis_labels(o.column_labels, l.tk, l.factor);
  TextStyle style;
  style.size = kLabelSize;
  style.anchor = TextAnchor::kEnd;
  for (int64_t pr = 0; pr < l.grid_rows; ++pr) {
    for (int64_t r = 0; r < l.rows; r += l.label_step) {
      canvas.text(l.cell_x(0, 0) - 5, l.cell_y(pr, r) + l.cell / 2 + 0.35 * kLabelSize,
                  rows[static_cast<size_t>(r)], style);
    }
  }
  style.vertical = true;
  const double bottom = l.cell_y(l.grid_rows - 1, l.rows) + 5;
  for (int64_t pc = 0; pc < l.grid_cols; ++pc) {
    for (int64_t c = 0; c < l.cols; c += l.label_step) {
      canvas.text(l.cell_x(pc, c) + l.cell / 2 + 0.35 * kLabelSize, bottom,
                  cols[static_cast<size_t>(c)], style);
    }
  }
}

void draw_legend(Canvas& canvas, const HeatmapLayout& l, const Scale& scale) {
  constexpr int kStrips = 64;
  const double strip = l.legend_height / kStrips;
  for (int i = 0; i < kStrips; ++i) {
    const float t = 1.0f - (static_cast<float>(i) + 0.5f) / kStrips;
    canvas.fill_rect(l.legend_x, l.top + strip * i, kLegendBar, strip + 0.5, viridis(t));
  }
  canvas.outline_rect(l.legend_x - 1, l.top - 1, kLegendBar + 2, l.legend_height + 2, kFrame);
  const bool row = scale.kind == HeatmapScale::kRow;
  const float lo = scale.kind == HeatmapScale::kGlobal ? scale.vmin : 0.0f;
  const float hi = scale.kind == HeatmapScale::kGlobal ? scale.vmax : 1.0f;
  TextStyle style;
  style.size = kLabelSize;
  const double x = l.legend_x + kLegendBar + 4;
  canvas.text(x, l.top + 0.7 * kLabelSize, row ? "row max" : format_value(hi), style);
  canvas.text(x, l.top + l.legend_height / 2 + 0.35 * kLabelSize,
              row ? "half" : format_value((lo + hi) / 2), style);
  canvas.text(x, l.top + l.legend_height, format_value(lo), style);
}

void draw(Canvas& canvas, const HeatmapLayout& l, const std::vector<float>& all, int rank,
          const HeatmapPictureOptions& o, const Scale& scale) {
  if (!o.title.empty()) {
    TextStyle title;
    title.size = kTitleSize;
    title.bold = true;
    canvas.text(kMargin, kMargin + kTitleSize, o.title, title);
  }
  const int64_t panel_size = l.tq * l.tk;
  for (int64_t pr = 0; pr < l.grid_rows; ++pr) {
    for (int64_t pc = 0; pc < l.grid_cols; ++pc) {
      const float* values = all.data() + (pr * l.grid_cols + pc) * panel_size;
      draw_panel(canvas, l, pr, pc, max_pool(values, l.tq, l.tk, l.factor), scale);
      if (l.grid_rows * l.grid_cols > 1) {
        TextStyle caption;
        caption.size = kLabelSize;
        caption.colour = kGrey;
        const std::string head = "head " + std::to_string(pc);
        canvas.text(l.cell_x(pc, 0), l.cell_y(pr, 0) - 5,
                    rank == 4 ? o.grid_row_name + " " + std::to_string(pr) + " · " + head : head,
                    caption);
      }
    }
  }
  draw_labels(canvas, l, o);
  draw_legend(canvas, l, scale);
  TextStyle note;
  note.size = kLabelSize;
  note.colour = kGrey;
  double y = l.notes_y;
  for (const std::string& line : notes(l, o)) {
    canvas.text(kMargin, y, line, note);
    y += kNoteLine;
  }
}

Scale scale_of(const std::vector<float>& all, const HeatmapPictureOptions& o) {
  for (const float v : all) ATTN_CHECK(std::isfinite(v), "picture: the weights hold ", v);
  const float largest = *std::max_element(all.begin(), all.end());
  const Scale s{o.scale, o.vmin, o.vmax.value_or(largest)};
  ATTN_CHECK(std::isfinite(s.vmin) && std::isfinite(s.vmax), "picture: vmin (", s.vmin,
             ") and vmax (", s.vmax, ") must be finite");
  return s;
}

std::string render(const Tensor& weights, const HeatmapPictureOptions& o, bool png) {
  ATTN_CHECK(weights.defined(), "picture: the weights are undefined");
  const HeatmapLayout layout = heatmap_layout(weights.shape(), o);
  const std::vector<float> all = weights.to_vector();  // row-major, whatever the strides
  const Scale scale = scale_of(all, o);
  const auto paint = [&](Canvas& canvas) { draw(canvas, layout, all, weights.rank(), o, scale); };
  return png ? render_png(layout.width, layout.height, paint)
             : render_svg(layout.width, layout.height, paint);
}

}  // namespace
}  // namespace viz

std::string heatmap_png(const Tensor& weights, const HeatmapPictureOptions& options) {
  return viz::render(weights, options, true);
}

std::string heatmap_svg(const Tensor& weights, const HeatmapPictureOptions& options) {
  return viz::render(weights, options, false);
}

}  // namespace attn
