// The ASCII heat map: value -> one of nine block characters, two per cell so cells look square.
#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "attn/error.hpp"
#include "attn/viz.hpp"

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

}  // namespace

std::string heatmap_ascii(const Tensor& matrix, const HeatmapOptions& options) {
  ATTN_CHECK(matrix.defined() && matrix.rank() == 2, "heatmap: weights must be a 2-D matrix, got ",
             matrix.defined() ? matrix.shape_string() : "undefined");
  const int64_t rows = matrix.dim(0), cols = matrix.dim(1);
  check_labels(options.row_labels, rows, "row");
  check_labels(options.column_labels, cols, "column");
  const std::vector<float> values = matrix.to_vector();
  for (float v : values) ATTN_CHECK(std::isfinite(v), "heatmap: the matrix holds ", v);
  const float vmax = options.vmax.value_or(*std::max_element(values.begin(), values.end()));
  ATTN_CHECK(std::isfinite(options.vmin) && std::isfinite(vmax), "heatmap: vmin (", options.vmin,
             ") and vmax (", vmax, ") must be finite");

  size_t label_width = 0;
  for (const auto& label : options.row_labels)
    label_width = std::max(label_width, code_points(label).size());
  const std::string margin(label_width + (label_width > 0 ? 1 : 0), ' ');

  std::ostringstream out;
  // Column labels, written top to bottom, one character per cell.
  size_t label_height = 0;
  for (const auto& label : options.column_labels)
    label_height = std::max(label_height, code_points(label).size());
  for (size_t line = 0; line < label_height; ++line) {
    std::string text = margin;
    for (const auto& label : options.column_labels) {
      const auto points = code_points(label);
      text += (line < points.size() ? points[line] : " ") + std::string(" ");
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << '\n';
  }
  for (int64_t r = 0; r < rows; ++r) {
    out << (options.row_labels.empty() ? margin
                                       : pad_right(options.row_labels[r], label_width) + " ");
    for (int64_t c = 0; c < cols; ++c) {
      const char* cell = kRamp[ramp_level(values[r * cols + c], options.vmin, vmax)];
      out << cell << cell;
    }
    out << '\n';
  }
  out << "scale: ' ' = " << options.vmin << " … '█' = " << vmax << '\n';
  return out.str();
}

}  // namespace attn
