#include "attn/bfloat16.hpp"

#include <bit>
#include <cmath>

namespace attn {

uint16_t to_bfloat16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // stays a quiet NaN
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);                 // to nearest, ties even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace attn
