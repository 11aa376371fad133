// The PNG painter: cairo's image surface (ARGB32), its toy text API with DejaVu Sans, and its
// PNG encoder writing into memory. Cairo draws antialiased text with a real font; writing a
// rasteriser and a font renderer of our own would be neither smaller nor as good.
#include <cairo.h>

#include <cmath>
#include <memory>

#include "attn/error.hpp"
#include "src/viz/canvas.hpp"

namespace attn::viz {
namespace {

void set_colour(cairo_t* cr, Rgb c) {
  cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0);
}

class PngCanvas final : public Canvas {
 public:
  explicit PngCanvas(cairo_t* cr) : cr_(cr) {}
  void fill_rect(double x, double y, double w, double h, Rgb colour) override {
    set_colour(cr_, colour);
    cairo_save(cr_);
    cairo_set_antialias(cr_, CAIRO_ANTIALIAS_NONE);  // no seams between neighbouring cells
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
    cairo_restore(cr_);
  }
  void outline_rect(double x, double y, double w, double h, Rgb colour) override {
    set_colour(cr_, colour);
    cairo_set_line_width(cr_, 1.0);
    cairo_rectangle(cr_, x + 0.5, y + 0.5, w - 1, h - 1);
    cairo_stroke(cr_);
  }
  void text(double x, double y, const std::string& s, const TextStyle& style) override {
    const std::string shown = valid_utf8(s);
    cairo_save(cr_);
    cairo_select_font_face(cr_, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           style.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr_, style.size);
    cairo_text_extents_t extents;
    cairo_text_extents(cr_, shown.c_str(), &extents);
    const double shift = style.anchor == TextAnchor::kStart    ? 0.0
                         : style.anchor == TextAnchor::kMiddle ? extents.x_advance / 2
                                                               : extents.x_advance;
    cairo_translate(cr_, x, y);
    if (style.vertical) cairo_rotate(cr_, -M_PI / 2);
    cairo_move_to(cr_, -shift, 0.0);
    set_colour(cr_, style.colour);
    cairo_show_text(cr_, shown.c_str());
    cairo_restore(cr_);
  }

 private:
  cairo_t* cr_;
};

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

std::string render_png(int width, int height, const std::function<void(Canvas&)>& draw) {
  const std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height), cairo_surface_destroy);
  ATTN_CHECK(cairo_surface_status(surface.get()) == CAIRO_STATUS_SUCCESS,
             "picture: cairo cannot make a ", width, " x ", height,
             " image: ", cairo_status_to_string(cairo_surface_status(surface.get())));
  const std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()),
                                                              cairo_destroy);
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_paint(cr.get());
  PngCanvas canvas(cr.get());
  draw(canvas);
  ATTN_CHECK(cairo_status(cr.get()) == CAIRO_STATUS_SUCCESS,
             "picture: cairo failed to draw: ", cairo_status_to_string(cairo_status(cr.get())));
  std::string png;
  const cairo_status_t written =
      cairo_surface_write_to_png_stream(surface.get(), append_bytes, &png);
  ATTN_CHECK(written == CAIRO_STATUS_SUCCESS,
             "picture: cairo failed to encode the PNG: ", cairo_status_to_string(written));
  return png;
}

}  // namespace attn::viz
