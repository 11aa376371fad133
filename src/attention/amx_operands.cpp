#include "src/attention/amx_operands.hpp"

#include <algorithm>

#include "attn/threads.hpp"
#include "src/core/simd_cap.hpp"
#include "src/kernels/bfloat16_pack.hpp"

namespace attn::detail {
namespace {

int64_t amx_padded(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// One (T, width) matrix per (b, K/V head), strides as p's K or V.
struct Source {
  const float* data;
  const int64_t* stride;
  int64_t width;
};

using PackHead = void (*)(const float*, int64_t, size_t, size_t, size_t, uint16_t*);

// Packs m for every (b, K/V head) with `pack` into rows of out.row elements, the first
// `packed_rows` of them written by it and the rest of out.head zeroed.
kernels::Bf16Matrices pack_heads(const kernels::FlashProblem& p, Source m, PackHead pack,
                                 kernels::Bf16Matrices out, int64_t packed_rows,
                                 std::unique_ptr<uint16_t[]>& storage) {
  storage.reset(new uint16_t[static_cast<size_t>(p.batch * p.kv_heads * out.head)]);
  parallel_for(p.batch * p.kv_heads, [&](int64_t i) {
    const int64_t b = i / p.kv_heads, h = i % p.kv_heads;
    uint16_t* dst = storage.get() + i * out.head;
    pack(m.data + b * m.stride[0] + h * m.stride[1], m.stride[2], static_cast<size_t>(p.tk),
         static_cast<size_t>(m.width), static_cast<size_t>(out.row), dst);
    std::fill(dst + packed_rows * out.row, dst + out.head, uint16_t{0});
  });
  out.data = storage.get();
  return out;
}

// As rows: width padded to 32 (a tile row's reduction), and 16 zero rows past T (a block's
// last 16-row tile may run past its keys).
kernels::Bf16Matrices pack_rows(const kernels::FlashProblem& p, Source m,
                                std::unique_ptr<uint16_t[]>& storage) {
  kernels::Bf16Matrices out;
  out.row = amx_padded(m.width, 32);
  out.head = (p.tk + 16) * out.row;
  return pack_heads(p, m, kernels::pack_bfloat16_rows, out, p.tk, storage);
}

// Transposed: width rows padded to 16 (a tile's rows), each T keys and 32 zeros past them (a
// key block's products reduce over whole chunks of 32 keys).
kernels::Bf16Matrices pack_transposed(const kernels::FlashProblem& p, Source m,
                                      std::unique_ptr<uint16_t[]>& storage) {
  kernels::Bf16Matrices out;
  out.row = amx_padded(p.tk + 32, 16);
  out.head = amx_padded(m.width, 16) * out.row;
  return pack_heads(p, m, kernels::pack_bfloat16_transposed, out, m.width, storage);
}

}  // namespace

bool products_on_amx(const SdpaOptions& options) {
  return options.precision == Dtype::kBFloat16 && amx_bf16_usable();
}

void attach_amx_operands(kernels::FlashProblem& p, AmxPass pass, AmxOperands& storage) {
  const Source keys{p.k, p.k_stride, p.d}, values{p.v, p.v_stride, p.dv};
  p.amx_keys = pack_rows(p, keys, storage.keys);
  if (pass == AmxPass::kForward) {
    p.amx_values_t = pack_transposed(p, values, storage.values_t);
  } else {
    p.amx_keys_t = pack_transposed(p, keys, storage.keys_t);
    p.amx_values = pack_rows(p, values, storage.values);
  }
}

}  // namespace attn::detail
