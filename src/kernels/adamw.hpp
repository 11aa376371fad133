// AdamW's update over a span, vectorised with Highway: the scalar loop did not vectorise
// (the compiler could not rule out aliasing between the five arrays) and took ~4 % of a GPT
// training step. Formula and options in include/attn/train.hpp and src/train/adamw.cpp.
#pragma once

#include <cstdint>

namespace attn::kernels {

struct AdamWStep {
  float beta1, beta2;
  float step_size;   // lr / (1 − beta1^t)
  float sqrt_bias2;  // √(1 − beta2^t)
  float eps;
  float grad_scale;  // the gradients are used times this (clipping); 1 = as they are
};

// For each i, with g = grad_scale·g[i]: p *= keep; m = β1·m + (1 − β1)·g;
// v = β2·v + (1 − β2)·g·g; p −= step_size·m / (√v / sqrt_bias2 + eps). keep is
// 1 − lr·weight_decay for a decayed span, 1 otherwise. Separate multiplies and adds (no fused
// multiply-add), so every CPU computes the same bits.
void adamw_update_span(float* p, float* m, float* v, const float* g, int64_t n, float keep,
                       const AdamWStep& s);

}  // namespace attn::kernels
