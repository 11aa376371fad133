#include "src/attention/amx_operands.hpp"

#include <algorithm>
#include <array>
#include <atomic>

#include "attn/threads.hpp"
#include "src/core/simd_cap.hpp"
#include "src/kernels/bfloat16_pack.hpp"
#include "src/kernels/reductions.hpp"

namespace attn::detail {
namespace {

int64_t amx_padded(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// One (T, width) matrix per (b, K/V head), strides as p's K or V: the caller's floats, or the
// words of bfloat16 tensors (FlashProblem::k_words, v_words).
struct Source {
  const float* data;
  const uint16_t* words;
  const int64_t* stride;
  int64_t width;
};

// One matrix a pass packs: from what, in which layout (as rows or transposed; out.row and
// out.head; out.data is set once packed), the first `packed_rows` rows of each head written by
// the packer and the rest zeroed, and whether m's rows are scanned for NaN and ±inf.
struct Packing {
  Source m;
  bool transposed;
  kernels::Bf16Matrices out;
  int64_t packed_rows;
  bool scan;
};

// Packs `rows` rows of x.m from `first` (floats or words) into dst; true when `scan` and one
// of those rows holds NaN or ±inf (scanned right after, while they are in cache).
template <class Element>
bool pack_head(const Packing& x, const Element* first, int64_t rows, uint16_t* dst, bool scan) {
  const int64_t stride = x.m.stride[2];
  const auto n = static_cast<size_t>(rows), width = static_cast<size_t>(x.m.width),
             ld = static_cast<size_t>(x.out.row);
  if (x.transposed) {
    kernels::pack_bfloat16_transposed(first, stride, n, width, ld, dst);
  } else {
    kernels::pack_bfloat16_rows(first, stride, n, width, ld, dst);
  }
  return scan && kernels::any_non_finite(first, rows, x.m.width, stride);
}

// As rows: width padded to 32 (a tile row's reduction), and 16 zero rows past T (a block's
// last 16-row tile may run past its keys).
Packing as_rows(const kernels::FlashProblem& p, Source m, bool scan) {
  kernels::Bf16Matrices out;
  out.row = amx_padded(m.width, 32);
  out.head = (p.tk + 16) * out.row;
  return {m, false, out, p.tk, scan};
}

// Transposed: width rows padded to 16 (a tile's rows), each T keys and 32 zeros past them (a
// key block's products reduce over whole chunks of 32 keys).
Packing transposed(const kernels::FlashProblem& p, Source m, bool scan) {
  kernels::Bf16Matrices out;
  out.row = amx_padded(p.tk + 32, 16);
  out.head = amx_padded(m.width, 16) * out.row;
  return {m, true, out, m.width, scan};
}

// Packs every matrix of `packings` for every (b, K/V head), one job per head doing all of them
// (a pool dispatch per matrix was a fixed cost that weighed at short sequences: the training
// step's 48 heads of 64 keys). With non_finite, the rows marked `scan` are scanned for NaN and
// ±inf right after they are packed, while they are in cache.
template <size_t kCount>
void pack_heads(const kernels::FlashProblem& p, std::array<Packing, kCount>& packings,
                AmxOperands& storage, std::atomic<bool>* non_finite) {
  const int64_t heads = p.batch * p.kv_heads;
  std::array<int64_t, kCount> offset{};  // each matrix's first word in the one block
  int64_t words = 0;
  for (size_t i = 0; i < kCount; ++i) {
    offset[i] = words;
    words += amx_padded(heads * packings[i].out.head, 32);  // 64-byte aligned starts
  }
  storage.storage.emplace(static_cast<size_t>(words) * sizeof(uint16_t));
  uint16_t* block = storage.storage->as<uint16_t>();
  for (size_t i = 0; i < kCount; ++i) packings[i].out.data = block + offset[i];
  parallel_for(heads, [&](int64_t i) {
    const int64_t b = i / p.kv_heads, h = i % p.kv_heads;
    for (const Packing& x : packings) {
      uint16_t* dst = const_cast<uint16_t*>(x.out.data) + i * x.out.head;
      const int64_t offset = b * x.m.stride[0] + h * x.m.stride[1];
      const bool scan = x.scan && non_finite != nullptr;
      if (x.m.words != nullptr ? pack_head(x, x.m.words + offset, p.tk, dst, scan)
                               : pack_head(x, x.m.data + offset, p.tk, dst, scan))
        non_finite->store(true, std::memory_order_relaxed);
      std::fill(dst + x.packed_rows * x.out.row, dst + x.out.head, uint16_t{0});
    }
  });
}

}  // namespace

bool products_on_amx(const SdpaOptions& options) {
  return options.precision == Dtype::kBFloat16 && (amx_bf16_usable() || dpbf16_usable());
}

void attach_amx_operands(kernels::FlashProblem& p, AmxPass pass, AmxOperands& storage,
                         std::atomic<bool>* non_finite_input) {
  p.amx_tiles = amx_bf16_usable();  // else the same operands go to vdpbf16ps (products_on_amx)
  const Source keys{p.k, p.k_words, p.k_stride, p.d}, values{p.v, p.v_words, p.v_stride, p.dv};
  if (pass == AmxPass::kForward) {
    std::array<Packing, 2> packings{as_rows(p, keys, true), transposed(p, values, true)};
    pack_heads(p, packings, storage, non_finite_input);
    p.amx_keys = packings[0].out;
    p.amx_values_t = packings[1].out;
  } else {
    std::array<Packing, 3> packings{as_rows(p, keys, true),
                                    transposed(p, keys, false),  // K: scanned
                                    as_rows(p, values, true)};
    pack_heads(p, packings, storage, non_finite_input);
    p.amx_keys = packings[0].out;
    p.amx_keys_t = packings[1].out;
    p.amx_values = packings[2].out;
  }
}

}  // namespace attn::detail
