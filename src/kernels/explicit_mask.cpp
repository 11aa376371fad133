// See explicit_mask.hpp. The mask lies query-major ((…, Tq, Tk): a query's keys consecutive) and
// the scores key-major (Sᵀ: a key's queries in the vector lanes), so the mask is read a square
// tile of N queries × N keys at a time and transposed in registers (TransposeTile), then applied
// a key row of N queries at a time. Element by element (down each key's column of the mask, a
// mask row apart each), an (H, T, T) additive bias made the causal forward at T = 4096 5x
// slower; read along its rows but still a scalar at a time, 1.76x (docs/performance.md).
// Tiles that do not fill N × N (the block's edges, a mask broadcast along the keys) go element
// by element.
#include "src/kernels/explicit_mask.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/explicit_mask.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// value·scale, finite where value is: a mask of float's lowest value (Hugging Face's) would
// overflow to -inf in base 2, and a row masked so everywhere would see no key instead of all
// keys equally, as it does in base e.
inline float ScaledMaskValue(float value, float scale) {
  if (!std::isfinite(value)) return value;
  return std::clamp(value * scale, std::numeric_limits<float>::lowest(),
                    std::numeric_limits<float>::max());
}

// One score from one mask value.
inline void ApplyOne(MaskKind kind, float value, float scale, float* score) {
  if (kind == MaskKind::kBoolean) {
    if (value == 0.0f) *score = kMinusInf;
  } else {
    *score += ScaledMaskValue(value, scale);
  }
}

void ApplyExplicitMask(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                       int64_t j0, size_t first, size_t cols, float additive_scale, float* st,
                       size_t ldq) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const int64_t row_stride = p.mask_stride[2], key_stride = p.mask_stride[3];
  const float* base =
      p.mask + b * p.mask_stride[0] + h * p.mask_stride[1] + q0 * row_stride + j0 * key_stride;
  const bool tiled = kHasTransposeTile && N * N <= 256 && key_stride == 1;
  const size_t tiled_rows = tiled ? static_cast<size_t>(rows) / N * N : 0;
  const size_t tiled_cols = tiled ? first + (cols - first) / N * N : first;
  HWY_ALIGN float tile[256];
  const VF scale = hn::Set(df, additive_scale),
           lowest = hn::Set(df, std::numeric_limits<float>::lowest()),
           highest = hn::Set(df, std::numeric_limits<float>::max()),
           minus_inf = hn::Set(df, kMinusInf);
  for (size_t r0 = 0; r0 < tiled_rows; r0 += N) {
    for (size_t c0 = first; c0 < tiled_cols; c0 += N) {
      // tile[c·N + r] = mask of query r0 + r, key c0 + c.
      TransposeTile(base + static_cast<int64_t>(r0) * row_stride + static_cast<int64_t>(c0),
                    row_stride, 1.0f, tile, N);
      for (size_t c = 0; c < N; ++c) {
        float* s = st + (c0 + c) * ldq + r0;
        const VF m = hn::Load(df, tile + c * N);
        if (p.mask_kind == MaskKind::kBoolean) {
          hn::StoreU(hn::IfThenElse(hn::Eq(m, hn::Zero(df)), minus_inf, hn::LoadU(df, s)), df, s);
        } else {  // finite values scaled and clamped, -inf kept (ScaledMaskValue)
          const VF scaled = hn::Min(hn::Max(hn::Mul(m, scale), lowest), highest);
          const VF add = hn::IfThenElse(hn::IsFinite(m), scaled, m);
          hn::StoreU(hn::Add(hn::LoadU(df, s), add), df, s);
        }
      }
    }
  }
  // The edges: rows past the last whole tile, and keys past the last whole tile in every row.
  for (int64_t r = 0; r < rows; ++r) {
    const float* m = base + r * row_stride;
    const size_t from = static_cast<size_t>(r) < tiled_rows ? tiled_cols : first;
    for (size_t c = from; c < cols; ++c) {
      ApplyOne(p.mask_kind, m[static_cast<int64_t>(c) * key_stride], additive_scale,
               st + c * ldq + static_cast<size_t>(r));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(ApplyExplicitMask);

void apply_explicit_mask(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                         int64_t j0, size_t first, size_t cols, float additive_scale, float* st,
                         size_t ldq) {
  HWY_DYNAMIC_DISPATCH(ApplyExplicitMask)
  (p, b, h, q0, rows, j0, first, cols, additive_scale, st, ldq);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
