// Seeded random tensors that are the same on every machine.
//
// The generator is std::mt19937_64, whose output sequence the C++ standard fixes exactly.
// Each 64-bit draw becomes a float by our own documented transforms (not std::*_distribution,
// whose algorithms differ between standard libraries):
//   uniform(lo, hi):  u = (draw >> 40) · 2⁻²⁴ ∈ [0, 1),  value = lo + (hi − lo)·u
//   normal(mean, std): Box–Muller on two draws, u1 = ((draw >> 11) + 1) · 2⁻⁵³ ∈ (0, 1],
//                      u2 = (draw >> 11) · 2⁻⁵³, in double precision, both outputs used:
//                      r = √(−2 ln u1), z0 = r cos 2πu2, z1 = r sin 2πu2.
// Elements are filled in row-major order of the tensor's shape (whatever its strides).
#pragma once

#include <cstdint>

#include "attn/tensor.hpp"

namespace attn {

void fill_uniform(Tensor& t, uint64_t seed, float lo = 0.0f, float hi = 1.0f);
void fill_normal(Tensor& t, uint64_t seed, float mean = 0.0f, float stddev = 1.0f);

// New contiguous tensors filled as above.
Tensor rand_uniform(const Shape& shape, uint64_t seed, float lo = 0.0f, float hi = 1.0f);
Tensor rand_normal(const Shape& shape, uint64_t seed, float mean = 0.0f, float stddev = 1.0f);

}  // namespace attn
