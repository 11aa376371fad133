// What the picture writers draw on: filled rectangles, outlines and text, in pixels with y
// down. One drawing routine (heatmap_picture.cpp) paints the same picture onto cairo's raster
// (PNG) and onto SVG text, so the two formats cannot drift apart. Internal to the library.
#pragma once

#include <functional>
#include <string>

#include "attn/viz.hpp"

namespace attn::viz {

enum class TextAnchor { kStart, kMiddle, kEnd };

struct TextStyle {
  double size = 11.0;  // pixels
  TextAnchor anchor = TextAnchor::kStart;
  bool vertical = false;  // rotated a quarter turn, reading bottom to top
  bool bold = false;
  Rgb colour{0x22, 0x22, 0x22};
};

class Canvas {
 public:
  virtual ~Canvas() = default;
  virtual void fill_rect(double x, double y, double width, double height, Rgb colour) = 0;
  virtual void outline_rect(double x, double y, double width, double height, Rgb colour) = 0;
  // (x, y) is the baseline's anchor point; text is UTF-8 (see valid_utf8).
  virtual void text(double x, double y, const std::string& text, const TextStyle& style) = 0;
};

// The picture `draw` paints on a white width × height canvas, as PNG bytes (cairo, the font
// DejaVu Sans) or as an SVG document (text stays text: searchable, selectable).
std::string render_png(int width, int height, const std::function<void(Canvas&)>& draw);
std::string render_svg(int width, int height, const std::function<void(Canvas&)>& draw);

// "#rrggbb", as SVG, CSS and the pages' scripts write a colour.
std::string hex_colour(Rgb c);

// s with each byte that is not part of well-formed UTF-8, and each control character,
// replaced by U+FFFD.
std::string valid_utf8(const std::string& s);
// valid_utf8(s) with & < > " escaped, for SVG and HTML text and attribute values.
std::string escape_markup(const std::string& s);

}  // namespace attn::viz
