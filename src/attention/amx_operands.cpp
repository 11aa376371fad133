#include "src/attention/amx_operands.hpp"

#include <algorithm>

#include "attn/threads.hpp"
#include "src/core/simd_cap.hpp"
#include "src/kernels/bfloat16_pack.hpp"

namespace attn::detail {
namespace {

int64_t amx_padded(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

void attach_amx_operands(kernels::FlashProblem& p, AmxOperands& storage) {
  if (!p.bf16_products || !amx_bf16_usable()) return;
  // A key block's tiles read up to 15 rows past its keys (16-row tiles) and its P·V reduction
  // up to 31 keys past them (chunks of 32): the padding is zero, so they add nothing.
  const int64_t key_rows = p.tk + 16;
  p.amx_key_row = amx_padded(p.d, 32);
  p.amx_key_head = key_rows * p.amx_key_row;
  p.amx_value_row = amx_padded(p.tk + 32, 16);
  p.amx_value_head = amx_padded(p.dv, 16) * p.amx_value_row;
  const int64_t heads = p.batch * p.kv_heads;
  // Not zeroed first: the packing writes every element, padding included.
  storage.keys.reset(new uint16_t[static_cast<size_t>(heads * p.amx_key_head)]);
  storage.values_t.reset(new uint16_t[static_cast<size_t>(heads * p.amx_value_head)]);
  parallel_for(heads, [&](int64_t i) {
    const int64_t b = i / p.kv_heads, h = i % p.kv_heads;
    const auto key_row = static_cast<size_t>(p.amx_key_row);
    uint16_t* keys = storage.keys.get() + i * p.amx_key_head;
    kernels::pack_bfloat16_rows(p.k + b * p.k_stride[0] + h * p.k_stride[1], p.k_stride[2],
                                static_cast<size_t>(p.tk), static_cast<size_t>(p.d), key_row, keys);
    std::fill(keys + p.tk * p.amx_key_row, keys + p.amx_key_head, uint16_t{0});
    const auto value_row = static_cast<size_t>(p.amx_value_row);
    const auto dv = static_cast<size_t>(p.dv);
    uint16_t* values_t = storage.values_t.get() + i * p.amx_value_head;
    kernels::pack_bfloat16_transposed(p.v + b * p.v_stride[0] + h * p.v_stride[1], p.v_stride[2],
                                      static_cast<size_t>(p.tk), dv, value_row, values_t);
    std::fill(values_t + dv * value_row, values_t + p.amx_value_head, uint16_t{0});
  });
  p.amx_keys = storage.keys.get();
  p.amx_values_t = storage.values_t.get();
}

}  // namespace attn::detail
