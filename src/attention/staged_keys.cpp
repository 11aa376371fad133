// See staged_keys.hpp.
#include "src/attention/staged_keys.hpp"

#include <algorithm>

#include "src/kernels/flash_forward.hpp"

namespace attn::detail {
namespace {

// `count` rows of `width` floats, `stride` apart, to consecutive rows at `to`.
void copy_rows(const float* from, int64_t stride, int64_t count, int64_t width, float* to) {
  for (int64_t r = 0; r < count; ++r) std::copy_n(from + r * stride, width, to + r * width);
}

}  // namespace

bool StagedKeys::applies(const kernels::FlashProblem& p) {
  // Fewer keys than a block: the few rows stay in L1 across the block's products, and the copy
  // would be a pass more (the rule with_consecutive_rows follows too).
  return p.amx_keys.data == nullptr && p.k != nullptr && p.tk >= kernels::kKeyBlock &&
         (p.k_stride[2] != p.d || p.v_stride[2] != p.dv);
}

bool StagedKeys::holds(const kernels::FlashProblem& p, int64_t b, int64_t h) const {
  return source_ == &p && b_ == b && kv_h_ == h / (p.heads / p.kv_heads);
}

const kernels::FlashProblem& StagedKeys::current_for(const kernels::FlashProblem& p, int64_t b,
                                                     int64_t h) const {
  return holds(p, b, h) ? staged_ : p;
}

const kernels::FlashProblem& StagedKeys::problem_for(const kernels::FlashProblem& p, int64_t b,
                                                     int64_t h) {
  if (holds(p, b, h)) return staged_;
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  // Every key, also those no query sees (top-left causal with Tq < Tk, a key length): the
  // tasks' scan for NaN and ±inf reads its share of them here, in cache.
  const int64_t end = p.tk;
  const auto floats = static_cast<size_t>(end * (p.d + p.dv));
  if (floats > capacity_ || !rows_) {
    rows_ = hwy::AllocateAligned<float>(std::max<size_t>(floats, 1));
    capacity_ = floats;
  }
  float* keys = rows_.get();
  float* values = keys + end * p.d;
  copy_rows(p.k + b * p.k_stride[0] + kv_h * p.k_stride[1], p.k_stride[2], end, p.d, keys);
  copy_rows(p.v + b * p.v_stride[0] + kv_h * p.v_stride[1], p.v_stride[2], end, p.dv, values);
  staged_ = p;
  // Every (b, K/V head) of the staged problem reads these rows: the head's own are the only
  // ones its tasks ask for.
  staged_.k = keys;
  staged_.k_stride[0] = staged_.k_stride[1] = 0;
  staged_.k_stride[2] = p.d;
  staged_.v = values;
  staged_.v_stride[0] = staged_.v_stride[1] = 0;
  staged_.v_stride[2] = p.dv;
  source_ = &p;
  b_ = b;
  kv_h_ = kv_h;
  return staged_;
}

}  // namespace attn::detail
