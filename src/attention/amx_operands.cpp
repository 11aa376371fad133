#include "src/attention/amx_operands.hpp"

#include <algorithm>
#include <atomic>

#include "attn/threads.hpp"
#include "src/core/simd_cap.hpp"
#include "src/kernels/bfloat16_pack.hpp"
#include "src/kernels/reductions.hpp"

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
// `packed_rows` of them written by it and the rest of out.head zeroed. With non_finite, also
// scans each head's rows for NaN and ±inf right after packing them, while they are in cache.
kernels::Bf16Matrices pack_heads(const kernels::FlashProblem& p, Source m, PackHead pack,
                                 kernels::Bf16Matrices out, int64_t packed_rows,
                                 std::unique_ptr<uint16_t[]>& storage,
                                 std::atomic<bool>* non_finite) {
  storage.reset(new uint16_t[static_cast<size_t>(p.batch * p.kv_heads * out.head)]);
  parallel_for(p.batch * p.kv_heads, [&](int64_t i) {
    const int64_t b = i / p.kv_heads, h = i % p.kv_heads;
    const float* rows = m.data + b * m.stride[0] + h * m.stride[1];
    uint16_t* dst = storage.get() + i * out.head;
    pack(rows, m.stride[2], static_cast<size_t>(p.tk), static_cast<size_t>(m.width),
         static_cast<size_t>(out.row), dst);
    std::fill(dst + packed_rows * out.row, dst + out.head, uint16_t{0});
    if (non_finite != nullptr && kernels::any_non_finite(rows, p.tk, m.width, m.stride[2]))
      non_finite->store(true, std::memory_order_relaxed);
  });
  out.data = storage.get();
  return out;
}

// As rows: width padded to 32 (a tile row's reduction), and 16 zero rows past T (a block's
// last 16-row tile may run past its keys).
kernels::Bf16Matrices pack_rows(const kernels::FlashProblem& p, Source m,
                                std::unique_ptr<uint16_t[]>& storage,
                                std::atomic<bool>* non_finite) {
  kernels::Bf16Matrices out;
  out.row = amx_padded(m.width, 32);
  out.head = (p.tk + 16) * out.row;
  return pack_heads(p, m, kernels::pack_bfloat16_rows, out, p.tk, storage, non_finite);
}

// Transposed: width rows padded to 16 (a tile's rows), each T keys and 32 zeros past them (a
// key block's products reduce over whole chunks of 32 keys).
kernels::Bf16Matrices pack_transposed(const kernels::FlashProblem& p, Source m,
                                      std::unique_ptr<uint16_t[]>& storage,
                                      std::atomic<bool>* non_finite) {
  kernels::Bf16Matrices out;
  out.row = amx_padded(p.tk + 32, 16);
  out.head = amx_padded(m.width, 16) * out.row;
  return pack_heads(p, m, kernels::pack_bfloat16_transposed, out, m.width, storage, non_finite);
}

}  // namespace

bool products_on_amx(const SdpaOptions& options) {
  return options.precision == Dtype::kBFloat16 && (amx_bf16_usable() || dpbf16_usable());
}

void attach_amx_operands(kernels::FlashProblem& p, AmxPass pass, AmxOperands& storage,
                         std::atomic<bool>* non_finite_input) {
  p.amx_tiles = amx_bf16_usable();  // else the same operands go to vdpbf16ps (products_on_amx)
  const Source keys{p.k, p.k_stride, p.d}, values{p.v, p.v_stride, p.dv};
  p.amx_keys = pack_rows(p, keys, storage.keys, non_finite_input);
  if (pass == AmxPass::kForward) {
    p.amx_values_t = pack_transposed(p, values, storage.values_t, non_finite_input);
  } else {
    p.amx_keys_t = pack_transposed(p, keys, storage.keys_t, nullptr);  // K: scanned above
    p.amx_values = pack_rows(p, values, storage.values, non_finite_input);
  }
}

}  // namespace attn::detail
