// The ASCII heat map: value -> one of nine block characters, two per cell so cells look square.
#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "attn/error.hpp"
#include "attn/viz.hpp"
#include "src/viz/down_sample.hpp"

namespace attn {
namespace {

constexpr std::array<const char*, 9> kRamp = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

// The UTF-8 code points of a label, one string each, so labels like "über" stack correctly.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> points;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    points.push_back(s.substr(i, len));
    i += len;
  }
  return points;
}

std::string pad_right(const std::string& s, size_t width) {
  const size_t shown = code_points(s).size();
  return s + std::string(width > shown ? width - shown : 0, ' ');
}

int ramp_level(float value, float vmin, float vmax) {
  if (vmax <= vmin) return value > vmin ? 8 : 0;
  const float unit = (value - vmin) / (vmax - vmin);
  return std::clamp(static_cast<int>(std::lround(unit * 8.0f)), 0, 8);
}

void check_labels(const std::vector<std::string>& labels, int64_t count, const char* what) {
  ATTN_CHECK(labels.empty() || static_cast<int64_t>(labels.size()) == count,
             "heatmap: ", labels.size(), " ", what, " labels for ", count, " ", what, "s");
}

// The largest value of each f × f block of a (rows, cols) matrix, and each block's first label.
struct Pooled {
  int64_t rows, cols;
  std::vector<float> values;
  std::vector<std::string> row_labels, column_labels;
};

Pooled pool(const std::vector<float>& values, int64_t rows, int64_t cols, int64_t f,
            const HeatmapOptions& options) {
  return {(rows + f - 1) / f, (cols + f - 1) / f, viz::max_pool(values.data(), rows, cols, f),
          viz::every_fth(options.row_labels, f), viz::every_fth(options.column_labels, f)};
}

}  // namespace

HeatmapScale heatmap_scale_from_string(const std::string& name) {
  if (name == "global") return HeatmapScale::kGlobal;
  if (name == "row") return HeatmapScale::kRow;
  if (name == "absolute") return HeatmapScale::kAbsolute;
  throw Error("heatmap: scale must be global, row or absolute, got '" + name + "'");
}

std::string heatmap_ascii(const Tensor& matrix, const HeatmapOptions& options) {
  ATTN_CHECK(matrix.defined() && matrix.rank() == 2, "heatmap: weights must be a 2-D matrix, got ",
             matrix.defined() ? matrix.shape_string() : "undefined");
  const int64_t rows = matrix.dim(0), cols = matrix.dim(1);
  check_labels(options.row_labels, rows, "row");
  check_labels(options.column_labels, cols, "column");
  ATTN_CHECK(options.max_width >= 0, "heatmap: max_width must be >= 0, got ", options.max_width);
  const std::vector<float> all = matrix.to_vector();
  for (float v : all) ATTN_CHECK(std::isfinite(v), "heatmap: the matrix holds ", v);
  // Two characters a cell after the row labels' margin (measured as it is drawn, in code points).
  size_t widest_row_label = 0;
  for (const auto& label : options.row_labels) {
    widest_row_label = std::max(widest_row_label, code_points(label).size());
  }
  const auto margin_width = static_cast<int64_t>(widest_row_label + (widest_row_label > 0 ? 1 : 0));
  const int64_t fit = std::max<int64_t>(1, (options.max_width - margin_width - 1) / 2);
  const int64_t f = options.max_width > 0 && cols > fit ? (cols + fit - 1) / fit : 1;
  const Pooled p = pool(all, rows, cols, f, options);
  const float largest = *std::max_element(p.values.begin(), p.values.end());
  const bool absolute = options.scale == HeatmapScale::kAbsolute;
  const float vmin = options.scale == HeatmapScale::kGlobal ? options.vmin : 0.0f;
  const float vmax = absolute ? 1.0f : options.vmax.value_or(largest);
  ATTN_CHECK(std::isfinite(vmin) && std::isfinite(vmax), "heatmap: vmin (", vmin, ") and vmax (",
             vmax, ") must be finite");

  size_t label_width = 0;
  for (const auto& label : p.row_labels) {
    label_width = std::max(label_width, code_points(label).size());
  }
  const std::string margin(label_width + (label_width > 0 ? 1 : 0), ' ');

  std::ostringstream out;
  // Column labels, written top to bottom, one character per cell.
  size_t label_height = 0;
  for (const auto& label : p.column_labels) {
    label_height = std::max(label_height, code_points(label).size());
  }
  for (size_t line = 0; line < label_height; ++line) {
    std::string text = margin;
    for (const auto& label : p.column_labels) {
      const auto points = code_points(label);
      text += (line < points.size() ? points[line] : " ") + std::string(" ");
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << '\n';
  }
  for (int64_t r = 0; r < p.rows; ++r) {
    out << (p.row_labels.empty() ? margin : pad_right(p.row_labels[r], label_width) + " ");
    const float* row = p.values.data() + r * p.cols;
    const float row_max =
        options.scale == HeatmapScale::kRow ? *std::max_element(row, row + p.cols) : vmax;
    for (int64_t c = 0; c < p.cols; ++c) {
      const char* cell = kRamp[ramp_level(row[c], vmin, row_max)];
      out << cell << cell;
    }
    out << '\n';
  }
  if (options.scale == HeatmapScale::kRow) {
    out << "scale: per row, ' ' = 0 … '█' = the row's largest\n";
  } else {
    out << "scale: ' ' = " << vmin << " … '█' = " << vmax << '\n';
  }
  if (f > 1) {
    out << "down-sampled " << f << "×: each cell is the largest of a " << f << " × " << f
        << " block of the " << rows << " × " << cols << " weights\n";
  }
  return out.str();
}

}  // namespace attn
