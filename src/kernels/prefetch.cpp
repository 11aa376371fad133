// See prefetch.hpp.
#include "src/kernels/prefetch.hpp"

#include <algorithm>

#include "src/kernels/block_visibility.hpp"

namespace attn::kernels {
namespace {

constexpr int64_t kLineBytes = 64;

// Every cache line of `rows` rows of `width` elements (floats, or the words of bfloat16
// tensors), `stride` elements apart, towards L2 (locality 2: the current task keeps L1 to
// itself).
template <class Element>
void prefetch_rows(const Element* first, int64_t stride, int64_t rows, int64_t width) {
  constexpr auto kLine = kLineBytes / static_cast<int64_t>(sizeof(Element));
  for (int64_t r = 0; r < rows; ++r) {
    const Element* row = first + r * stride;
    for (int64_t e = 0; e < width; e += kLine) __builtin_prefetch(row + e, 0, 2);
    __builtin_prefetch(row + width - 1, 0, 2);  // a row that straddles one more line
  }
}

// The first key block a query block [q0, q0 + rows) of batch entry b sees: K and V rows. Not
// on AMX tiles, which read K and V packed per call (amx_operands.hpp), not these floats: asking
// for them there was 3 % of the bf16 forward at T = 1024 (two Xeon threads).
void prefetch_first_keys(const FlashProblem& p, int64_t b, int64_t kv_h, int64_t q0, int64_t rows) {
  if (p.amx_keys.data != nullptr) return;
  const KeyRange keys = visible_keys(p, b, q0, rows);
  const int64_t count = std::min(kKeyBlock, keys.end - keys.begin);
  if (count <= 0) return;
  prefetch_rows(p.k + b * p.k_stride[0] + kv_h * p.k_stride[1] + keys.begin * p.k_stride[2],
                p.k_stride[2], count, p.d);
  prefetch_rows(p.v + b * p.v_stride[0] + kv_h * p.v_stride[1] + keys.begin * p.v_stride[2],
                p.v_stride[2], count, p.dv);
}

}  // namespace

void prefetch_forward_block(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows) {
  const int64_t q_first = b * p.q_stride[0] + h * p.q_stride[1] + q0 * p.q_stride[2];
  if (p.q_words != nullptr) {
    prefetch_rows(p.q_words + q_first, p.q_stride[2], rows, p.d);
  } else {
    prefetch_rows(p.q + q_first, p.q_stride[2], rows, p.d);
  }
  if (p.out != nullptr && p.out_stride[2] != p.dv)  // rows apart (prefetch.hpp)
    prefetch_rows(p.out + b * p.out_stride[0] + h * p.out_stride[1] + q0 * p.out_stride[2],
                  p.out_stride[2], rows, p.dv);
  prefetch_first_keys(p, b, h / (p.heads / p.kv_heads), q0, rows);
}

void prefetch_query_block(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                          int64_t rows) {
  const FlashProblem& p = bp.forward;
  const int64_t q_at = b * p.q_stride[0] + h * p.q_stride[1] + q0 * p.q_stride[2];
  const int64_t o_at = b * p.out_stride[0] + h * p.out_stride[1] + q0 * p.out_stride[2];
  const int64_t do_at = b * bp.d_out_stride[0] + h * bp.d_out_stride[1] + q0 * bp.d_out_stride[2];
  if (p.q_words != nullptr) {  // bfloat16 tensors
    prefetch_rows(p.q_words + q_at, p.q_stride[2], rows, p.d);
    prefetch_rows(p.out_words + o_at, p.out_stride[2], rows, p.dv);
    prefetch_rows(bp.d_out_words + do_at, bp.d_out_stride[2], rows, p.dv);
    return;
  }
  prefetch_rows(p.q + q_at, p.q_stride[2], rows, p.d);
  prefetch_rows(p.out + o_at, p.out_stride[2], rows, p.dv);
  prefetch_rows(bp.d_out + do_at, bp.d_out_stride[2], rows, p.dv);
}

void prefetch_backward_head(const FlashBackwardProblem& bp, int64_t b, int64_t kv_h) {
  const FlashProblem& p = bp.forward;
  const int64_t group = p.heads / p.kv_heads, rows = std::min(kQueryBlock, p.tq);
  for (int64_t h = kv_h * group; h < (kv_h + 1) * group; ++h)
    prefetch_query_block(bp, b, h, 0, rows);
  prefetch_first_keys(p, b, kv_h, 0, rows);
}

}  // namespace attn::kernels
