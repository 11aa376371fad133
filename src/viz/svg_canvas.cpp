// The SVG painter: each call becomes one element, text as <text> in DejaVu Sans.
#include <cstdio>
#include <sstream>

#include "src/viz/canvas.hpp"

namespace attn::viz {
namespace {

// Numbers as SVG wants them: no exponent, no locale, two decimals at most.
std::string num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  std::string s = buffer;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

class SvgCanvas final : public Canvas {
 public:
  explicit SvgCanvas(std::ostringstream& out) : out_(out) {}
  void fill_rect(double x, double y, double w, double h, Rgb colour) override {
    out_ << "<rect x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w)
         << "\" height=\"" << num(h) << "\" fill=\"" << hex_colour(colour) << "\"/>\n";
  }
  void outline_rect(double x, double y, double w, double h, Rgb colour) override {
    out_ << "<rect x=\"" << num(x + 0.5) << "\" y=\"" << num(y + 0.5) << "\" width=\"" << num(w - 1)
         << "\" height=\"" << num(h - 1) << "\" fill=\"none\" stroke=\"" << hex_colour(colour)
         << "\"/>\n";
  }
  void text(double x, double y, const std::string& s, const TextStyle& style) override {
    static const char* const kAnchors[] = {"start", "middle", "end"};
    out_ << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-size=\"" << num(style.size)
         << "\" text-anchor=\"" << kAnchors[static_cast<int>(style.anchor)] << "\" fill=\""
         << hex_colour(style.colour) << "\"";
    if (style.bold) out_ << " font-weight=\"bold\"";
    if (style.vertical) out_ << " transform=\"rotate(-90 " << num(x) << " " << num(y) << ")\"";
    out_ << " xml:space=\"preserve\">" << escape_markup(s) << "</text>\n";
  }

 private:
  std::ostringstream& out_;
};

}  // namespace

std::string hex_colour(Rgb c) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", c.r, c.g, c.b);
  return buffer;
}

std::string render_svg(int width, int height, const std::function<void(Canvas&)>& draw) {
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  SvgCanvas canvas(out);
  draw(canvas);
  out << "</svg>\n";
  return out.str();
}

}  // namespace attn::viz
