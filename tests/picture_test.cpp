// The picture writers: the colour map's lightness, PNGs decoded back (size, the colour of a
// cell at its place), SVGs read back (size, labels as text nodes, a cell's fill), the
// down-sampling, the scales and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>

#include "attn/viz.hpp"
#include "png_reader.hpp"
#include "src/viz/canvas.hpp"
#include "src/viz/heatmap_layout.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::decode_png;
using testing::Image;
using testing::ThrowsWith;

// CIE L* of an sRGB colour, written from the formulas (the oracle of colormap.cpp's inverse).
double lightness(Rgb c) {
  auto linear = [](uint8_t v) {
    const double s = v / 255.0;
    return s <= 0.04045 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
  };
  const double y = 0.2126729 * linear(c.r) + 0.7151522 * linear(c.g) + 0.0721750 * linear(c.b);
  return y > 216.0 / 24389.0 ? 116.0 * std::cbrt(y) - 16.0 : y * 24389.0 / 27.0;
}

TEST(Viridis, LightnessRisesSteadilyFromVioletToYellow) {
  const auto& map = viridis();
  EXPECT_EQ(map.front(), (Rgb{0x44, 0x01, 0x54}));
  EXPECT_EQ(map.back(), (Rgb{0xfd, 0xe7, 0x25}));
  double smallest_step = 1e9, largest_step = 0;
  for (size_t i = 1; i < map.size(); ++i) {
    const double step = lightness(map[i]) - lightness(map[i - 1]);
    smallest_step = std::min(smallest_step, step);
    largest_step = std::max(largest_step, step);
  }
  // 76 units of L* over 255 steps is 0.30 a step. Rounding each channel to 8 bits moves a step
  // by up to ~0.3, so two neighbours may tie (to 1e-4); four steps apart, L* always rises.
  EXPECT_GT(smallest_step, -0.01);
  EXPECT_LT(largest_step, 0.7);
  for (size_t i = 4; i < map.size(); ++i) {
    EXPECT_GT(lightness(map[i]), lightness(map[i - 4]) + 0.5) << i;
  }
  EXPECT_EQ(viridis(0.0f), map.front());
  EXPECT_EQ(viridis(2.0f), map.back());  // clamped
  EXPECT_EQ(viridis(0.5f), map[128]);
}

// (L, H, T, T) weights: a one-hot diagonal in every panel, except panel (l, h) = (1, 2), whose
// queries all attend to key 0.
Tensor diagonal_grid(int64_t layers, int64_t heads, int64_t t) {
  Tensor w({layers, heads, t, t});
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t; ++i) w.at({l, h, i, (l == 1 && h == 2) ? 0 : i}) = 1.0f;
  return w;
}

double centre_x(const viz::HeatmapLayout& l, int64_t pc, int64_t c) {
  return l.cell_x(pc, c) + l.cell / 2;
}
double centre_y(const viz::HeatmapLayout& l, int64_t pr, int64_t r) {
  return l.cell_y(pr, r) + l.cell / 2;
}

TEST(HeatmapPng, DecodesToTheLayoutsSizeWithEachCellsColourInItsPlace) {
  const Tensor w = diagonal_grid(2, 3, 6);
  const HeatmapPictureOptions options;
  const viz::HeatmapLayout l = viz::heatmap_layout(w.shape(), options);
  const Image image = decode_png(heatmap_png(w, options));
  ASSERT_EQ(image.width, l.width);
  ASSERT_EQ(image.height, l.height);
  const Rgb bright = viridis(1.0f), dark = viridis(0.0f);
  for (int64_t pr = 0; pr < 2; ++pr) {
    for (int64_t pc = 0; pc < 3; ++pc) {
      const bool first_column = pr == 1 && pc == 2;
      for (int64_t i = 0; i < 6; ++i) {
        for (int64_t j = 0; j < 6; ++j) {
          const bool hot = first_column ? j == 0 : i == j;
          EXPECT_EQ(image.at(centre_x(l, pc, j), centre_y(l, pr, i)), hot ? bright : dark)
              << "panel (" << pr << ", " << pc << ") cell (" << i << ", " << j << ")";
        }
      }
    }
  }
  // Outside the panels the picture is white (where the first gap is).
  EXPECT_EQ(image.at(l.cell_x(1, 0) - 6, centre_y(l, 0, 0)), (Rgb{255, 255, 255}));
}

TEST(HeatmapPng, RowScaleBrightensEachRowToItsOwnLargest) {
  const Tensor w = Tensor::from_values({2, 2}, {1.0f, 0.0f, 0.1f, 0.05f});
  HeatmapPictureOptions options;
  const viz::HeatmapLayout l = viz::heatmap_layout(w.shape(), options);
  const Image global = decode_png(heatmap_png(w, options));
  EXPECT_EQ(global.at(centre_x(l, 0, 0), centre_y(l, 0, 1)), viridis(0.1f));
  options.scale = HeatmapScale::kRow;
  const Image row = decode_png(heatmap_png(w, options));
  EXPECT_EQ(row.at(centre_x(l, 0, 0), centre_y(l, 0, 1)), viridis(1.0f));
  EXPECT_EQ(row.at(centre_x(l, 0, 1), centre_y(l, 0, 1)), viridis(0.5f));
}

TEST(HeatmapPng, DrawsTextWithARealFont) {
  // A label's pixels are not all white: DejaVu Sans was found and drew something.
  const Tensor w = Tensor::from_values({1, 1}, {1.0f});
  HeatmapPictureOptions options;
  options.row_labels = {"WWWW"};
  options.column_labels = {"WWWW"};
  const viz::HeatmapLayout l = viz::heatmap_layout(w.shape(), options);
  const Image image = decode_png(heatmap_png(w, options));
  int inked = 0;
  for (int x = 0; x < static_cast<int>(l.left) - 4; ++x)
    for (int y = static_cast<int>(l.top); y < static_cast<int>(l.top + l.cell); ++y)
      inked += image.at(x, y) != Rgb{255, 255, 255};
  EXPECT_GT(inked, 20);
}

// The attribute `name` of the root <svg> element.
std::string svg_attribute(const std::string& svg, const std::string& name) {
  std::smatch m;
  const std::regex re("<svg[^>]* " + name + "=\"([^\"]*)\"");
  return std::regex_search(svg, m, re) ? m[1].str() : "";
}

std::vector<std::string> text_nodes(const std::string& svg) {
  std::vector<std::string> texts;
  const std::regex re("<text[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    texts.push_back((*it)[1].str());
  }
  return texts;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(HeatmapSvg, HasTheLayoutsSizeTokenLabelsAsTextAndTheCellFills) {
  const Tensor w = diagonal_grid(1, 1, 3);
  HeatmapPictureOptions options;
  options.row_labels = {"the", "cat", "<sat>"};
  options.column_labels = {"the", "cat", "<sat>"};
  options.title = "one head";
  const viz::HeatmapLayout l = viz::heatmap_layout(w.shape(), options);
  const std::string svg = heatmap_svg(w, options);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(svg_attribute(svg, "width"), std::to_string(l.width));
  EXPECT_EQ(svg_attribute(svg, "height"), std::to_string(l.height));
  const std::vector<std::string> texts = text_nodes(svg);
  EXPECT_EQ(std::count(texts.begin(), texts.end(), "cat"), 2);          // a row and a column label
  EXPECT_EQ(std::count(texts.begin(), texts.end(), "&lt;sat&gt;"), 2);  // escaped
  EXPECT_TRUE(contains(texts, "one head"));
  EXPECT_TRUE(contains(texts, "rows: queries, columns: keys; colour: one scale for every panel"));
  // Cell (1, 1) is bright, its run of cells (1, 0) dark.
  char bright[160];
  const Rgb b = viridis(1.0f);
  std::snprintf(bright, sizeof bright,
                "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"#%02x%02x%02x\"/>",
                l.cell_x(0, 1), l.cell_y(0, 1), l.cell, l.cell, b.r, b.g, b.b);
  EXPECT_NE(svg.find(bright), std::string::npos) << bright;
}

TEST(HeatmapSvg, ShowsMalformedLabelsAsReplacementCharacters) {
  const Tensor w = Tensor::from_values({1, 2}, {0.5f, 0.5f});
  HeatmapPictureOptions options;
  options.row_labels = {"a\nb"};
  options.column_labels = {"\xff", "caf\xc3\xa9"};
  const std::vector<std::string> texts = text_nodes(heatmap_svg(w, options));
  EXPECT_TRUE(contains(texts,
                       "a\xEF\xBF\xBD"
                       "b"));
  EXPECT_TRUE(contains(texts, "\xEF\xBF\xBD"));
  EXPECT_TRUE(contains(texts, "caf\xc3\xa9"));
  EXPECT_FALSE(heatmap_png(w, options).empty());  // cairo takes them too
}

TEST(HeatmapPicture, DownSamplesALongSequenceByBlockMaximaAndSaysSo) {
  Tensor w({300, 300});
  for (int64_t i = 0; i < 300; ++i) w.at({i, i}) = 1.0f;
  const viz::HeatmapLayout l = viz::heatmap_layout(w.shape(), {});
  EXPECT_EQ(l.factor, 3);
  EXPECT_EQ(l.rows, 100);
  const std::string svg = heatmap_svg(w);
  EXPECT_NE(svg.find("down-sampled 3x: each cell is the largest weight of a 3 x 3 block of the "
                     "300 x 300 weights"),
            std::string::npos);
  const Image image = decode_png(heatmap_png(w));
  for (int64_t i = 0; i < 100; i += 9) {
    EXPECT_EQ(image.at(centre_x(l, 0, i), centre_y(l, 0, i)), viridis(1.0f)) << i;
  }
}

TEST(HeatmapPicture, Errors) {
  EXPECT_TRUE(ThrowsWith([] { heatmap_png(Tensor({4})); }, "must be (Tq, Tk)"));
  // Shapes no Tensor has, which the layout still refuses.
  EXPECT_TRUE(ThrowsWith([] { viz::heatmap_layout({1, 1, 1, 2, 2}, {}); }, "must be (Tq, Tk)"));
  EXPECT_TRUE(ThrowsWith([] { viz::heatmap_layout({2, 0}, {}); }, "empty dim"));
  EXPECT_TRUE(ThrowsWith(
      [] {
        heatmap_png(Tensor::from_values({1, 2}, {NAN, 1.0f}));
      },
      "hold nan"));
  HeatmapPictureOptions labels;
  labels.row_labels = {"a", "b"};
  EXPECT_TRUE(ThrowsWith([&] { heatmap_svg(Tensor({3, 3}), labels); }, "2 row labels for 3"));
  HeatmapPictureOptions big;
  big.cell_pixels = 64;
  EXPECT_TRUE(ThrowsWith([&] { heatmap_png(Tensor({12, 12, 64, 64}), big); }, "too large"));
  big.cell_pixels = 65;
  EXPECT_TRUE(ThrowsWith([&] { heatmap_png(Tensor({2, 2}), big); }, "cell_pixels"));
  HeatmapPictureOptions cells;
  cells.max_cells = 0;
  EXPECT_TRUE(ThrowsWith([&] { heatmap_png(Tensor({2, 2}), cells); }, "max_cells"));
}

}  // namespace
}  // namespace attn
