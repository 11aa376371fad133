// See add_rows.hpp.
#include "src/kernels/add_rows.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/add_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ElementwiseAddRows(const float* a, int64_t ld_a, const float* b, int64_t ld_b, int64_t rows,
                        int64_t cols, float* out, int64_t ld_out) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * ld_a;
    const float* y = b + r * ld_b;
    float* z = out + r * ld_out;
    int64_t c = 0;
    for (; c + lanes <= cols; c += lanes)
      hn::StoreU(hn::Add(hn::LoadU(d, x + c), hn::LoadU(d, y + c)), d, z + c);
    for (; c < cols; ++c) z[c] = x[c] + y[c];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(ElementwiseAddRows);

void add_rows(const float* a, int64_t ld_a, const float* b, int64_t ld_b, int64_t rows,
              int64_t cols, float* out, int64_t ld_out) {
  HWY_DYNAMIC_DISPATCH(ElementwiseAddRows)(a, ld_a, b, ld_b, rows, cols, out, ld_out);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
