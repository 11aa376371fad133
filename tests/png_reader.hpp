// PNG bytes decoded into pixels with cairo's reader (libpng underneath): the tests look at
// what the picture writers and the browser drew.
#pragma once

#include <cairo.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "attn/viz.hpp"

namespace attn::testing {

struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;  // 0xRRGGBB
  Rgb at(double x, double y) const {
    const uint32_t p =
        pixels[static_cast<size_t>(static_cast<int>(y) * width + static_cast<int>(x))];
    return {static_cast<uint8_t>(p >> 16), static_cast<uint8_t>(p >> 8), static_cast<uint8_t>(p)};
  }
};

struct PngReader {
  const std::string* bytes;
  size_t offset = 0;
};

inline cairo_status_t read_bytes(void* closure, unsigned char* data, unsigned int length) {
  auto* r = static_cast<PngReader*>(closure);
  if (r->offset + length > r->bytes->size()) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, r->bytes->data() + r->offset, length);
  r->offset += length;
  return CAIRO_STATUS_SUCCESS;
}

// Decodes PNG bytes with cairo's reader (the writer's counterpart, but libpng underneath).
inline Image decode_png(const std::string& png) {
  PngReader reader{&png};
  const std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> s(
      cairo_image_surface_create_from_png_stream(read_bytes, &reader), cairo_surface_destroy);
  Image image;
  if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS) return image;
  image.width = cairo_image_surface_get_width(s.get());
  image.height = cairo_image_surface_get_height(s.get());
  const int stride = cairo_image_surface_get_stride(s.get());
  const unsigned char* data = cairo_image_surface_get_data(s.get());
  for (int y = 0; y < image.height; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + y * stride);
    for (int x = 0; x < image.width; ++x) image.pixels.push_back(row[x] & 0xFFFFFF);
  }
  return image;
}

}  // namespace attn::testing
