// The viridis colour map, rebuilt from five of its colours: the quartiles t = 0, ¼, ½, ¾, 1
// (#440154, #3b528b, #21918c, #5ec962, #fde725), joined by straight lines in CIELAB. Lightness
// L* then rises linearly within each quarter (14.9 → 90.9 in all), so equal steps of weight
// look like equal steps of colour, and the map stays readable in grey and to the colour-blind.
// Every colour of those lines lies inside sRGB (no clipping).
#include <algorithm>
#include <array>
#include <cmath>

#include "attn/viz.hpp"

namespace attn {
namespace {

struct Lab {
  double l, a, b;
};

// CIELAB (D65) of the five quartile colours.
constexpr std::array<Lab, 5> kViridisQuartiles = {{{14.90, 40.63, -32.33},
                                                   {35.65, 9.24, -34.43},
                                                   {54.52, -30.88, -6.09},
                                                   {72.91, -51.72, 41.96},
                                                   {90.86, -10.31, 85.30}}};

double lab_f_inverse(double t) {
  constexpr double delta = 6.0 / 29.0;
  return t > delta ? t * t * t : 3.0 * delta * delta * (t - 4.0 / 29.0);
}

// Linear-light sRGB component -> the 8-bit gamma-encoded value.
uint8_t encode_srgb(double linear) {
  const double c = std::clamp(linear, 0.0, 1.0);
  const double encoded = c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1.0 / 2.4) - 0.055;
  return static_cast<uint8_t>(std::lround(encoded * 255.0));
}

Rgb lab_to_srgb(const Lab& lab) {
  const double fy = (lab.l + 16.0) / 116.0, fx = fy + lab.a / 500.0, fz = fy - lab.b / 200.0;
  const double x = 0.95047 * lab_f_inverse(fx), y = lab_f_inverse(fy);
  const double z = 1.08883 * lab_f_inverse(fz);
  return {encode_srgb(3.2404542 * x - 1.5371385 * y - 0.4985314 * z),
          encode_srgb(-0.9692660 * x + 1.8760108 * y + 0.0415560 * z),
          encode_srgb(0.0556434 * x - 0.2040259 * y + 1.0572252 * z)};
}

std::array<Rgb, 256> make_viridis() {
  std::array<Rgb, 256> table{};
  for (size_t k = 0; k < table.size(); ++k) {
    const double s = 4.0 * static_cast<double>(k) / 255.0;
    const size_t i = std::min<size_t>(static_cast<size_t>(s), 3);
    const double u = s - static_cast<double>(i);
    const Lab& p = kViridisQuartiles[i];
    const Lab& q = kViridisQuartiles[i + 1];
    table[k] = lab_to_srgb({p.l + u * (q.l - p.l), p.a + u * (q.a - p.a), p.b + u * (q.b - p.b)});
  }
  return table;
}

}  // namespace

const std::array<Rgb, 256>& viridis() {
  static const std::array<Rgb, 256> table = make_viridis();
  return table;
}

Rgb viridis(float t) {
  const float clamped = std::isnan(t) ? 0.0f : std::clamp(t, 0.0f, 1.0f);
  return viridis()[static_cast<size_t>(std::lround(clamped * 255.0f))];
}

}  // namespace attn
