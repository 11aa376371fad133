// See loss_plot.hpp. A plain SVG: a frame, five labelled ticks per axis, a faint polyline of
// the step losses and two bold ones for the evaluations.
#include "loss_plot.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace attn::cli {
namespace {

constexpr double kWidth = 720, kHeight = 420, kLeft = 60, kRight = 20, kTop = 30, kBottom = 45;

std::string svg_number(double v, const char* format = "%.3g") {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

}  // namespace

std::string loss_svg(const LossHistory& history) {
  int64_t max_iter = 1;
  float low = 1e30f, high = -1e30f;
  for (const auto& [iter, loss] : history.steps) {
    max_iter = std::max(max_iter, iter);
    low = std::min(low, loss);
    high = std::max(high, loss);
  }
  for (const auto& [iter, train, val] : history.evaluations) {
    max_iter = std::max(max_iter, iter);
    low = std::min({low, train, val});
    high = std::max({high, train, val});
  }
  if (low > high) low = 0, high = 1;
  if (high - low < 1e-3f) high = low + 1e-3f;
  const auto x = [&](double iter) {
    return kLeft + (kWidth - kLeft - kRight) * iter / static_cast<double>(max_iter);
  };
  const auto y = [&](double loss) {
    return kTop + (kHeight - kTop - kBottom) * (high - loss) / (high - low);
  };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_number(kWidth) +
                    "\" height=\"" + svg_number(kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg +=
      "<text x=\"" + svg_number(kLeft) +
      "\" y=\"18\" font-size=\"14\">loss (faint: each step; blue: train; red: validation)</text>\n";
  svg += "<rect x=\"" + svg_number(kLeft) + "\" y=\"" + svg_number(kTop) + "\" width=\"" +
         svg_number(kWidth - kLeft - kRight) + "\" height=\"" +
         svg_number(kHeight - kTop - kBottom) + "\" fill=\"none\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double iter = max_iter * i / 4.0, loss = low + (high - low) * i / 4.0;
    svg += "<text x=\"" + svg_number(x(iter)) + "\" y=\"" + svg_number(kHeight - kBottom + 16) +
           "\" text-anchor=\"middle\">" + svg_number(iter, "%.0f") + "</text>\n";
    svg += "<text x=\"" + svg_number(kLeft - 6) + "\" y=\"" + svg_number(y(loss) + 4) +
           "\" text-anchor=\"end\">" + svg_number(loss, "%.2f") + "</text>\n";
  }
  svg += "<text x=\"" + svg_number((kLeft + kWidth - kRight) / 2) + "\" y=\"" +
         svg_number(kHeight - 8) + "\" text-anchor=\"middle\">iteration</text>\n";
  auto polyline = [&](const std::vector<std::pair<double, double>>& points, const char* style) {
    if (points.empty()) return;
    svg += std::string("<polyline fill=\"none\" ") + style + " points=\"";
    for (const auto& [i, l] : points)
      svg += svg_number(x(i), "%.1f") + "," + svg_number(y(l), "%.1f") + " ";
    svg += "\"/>\n";
  };
  std::vector<std::pair<double, double>> steps, train, val;
  for (const auto& [iter, loss] : history.steps) steps.emplace_back(iter, loss);
  for (const auto& [iter, t, v] : history.evaluations) {
    train.emplace_back(iter, t);
    val.emplace_back(iter, v);
  }
  polyline(steps, "stroke=\"#9bb\" stroke-width=\"0.7\"");
  polyline(train, "stroke=\"#1f5fbf\" stroke-width=\"2\"");
  polyline(val, "stroke=\"#c0392b\" stroke-width=\"2\"");
  return svg + "</svg>\n";
}

}  // namespace attn::cli
