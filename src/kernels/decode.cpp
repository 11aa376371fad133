// The decode kernel: scores of g·Tq query rows against one chunk of cached positions, the
// online softmax, and o += P·V, reading each cached key and value once for all the rows that
// share it (the g query heads of a group and the Tq new tokens). Decoding is bound by the
// bytes of K and V streamed from memory, so the loop is shaped around one pass over them:
// for each key, its d values are loaded once (widened from bfloat16 in registers when the
// cache stores bf16) and dotted with every row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "src/kernels/decode.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/decode.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

constexpr size_t kKeys = 64;  // keys scored before each softmax step

// Vector `i` of a cached row, widened to float.
HWY_INLINE VF LoadRow(DF df, const void* base, bool bf16, size_t offset) {
  if (bf16) {
    const hn::Rebind<hwy::bfloat16_t, DF> dbf;
    return hn::PromoteTo(df, hn::LoadU(dbf, static_cast<const hwy::bfloat16_t*>(base) + offset));
  }
  return hn::LoadU(df, static_cast<const float*>(base) + offset);
}

// o[0 .. NV·N) += Σ_c pr[c] · V[row c][e .. e + NV·N), with o in registers throughout.
template <size_t NV>
HWY_INLINE void AccumulateValues(const float* pr, size_t cols, const DecodeProblem& p,
                                 const size_t* offsets, size_t e, float* o) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[NV];
#pragma GCC unroll 4
  for (size_t x = 0; x < NV; ++x) acc[x] = hn::LoadU(df, o + x * N);
  for (size_t c = 0; c < cols; ++c) {
    const VF pc = hn::Set(df, pr[c]);
#pragma GCC unroll 4
    for (size_t x = 0; x < NV; ++x) {
      acc[x] = hn::MulAdd(pc, LoadRow(df, p.v, p.bf16, offsets[c] + e + x * N), acc[x]);
    }
  }
#pragma GCC unroll 4
  for (size_t x = 0; x < NV; ++x) hn::StoreU(acc[x], df, o + x * N);
}

void DecodeChunk(const DecodeProblem& p, int64_t b, int64_t kv_h, int64_t p0, int64_t p1,
                 float* partial, float* scratch) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const int64_t group = p.heads / p.kv_heads;
  const size_t rows = static_cast<size_t>(group * p.tq);
  const size_t d = static_cast<size_t>(p.d), ld = round_up(d, N);
  const size_t ldo = round_up(d, 64);  // matches decode_row_floats
  float* m = partial;
  float* l = m + rows;
  float* o = l + rows;
  float* qs = scratch;           // rows × ld, scaled, zero-padded
  float* s = qs + rows * ld;     // rows × kKeys scores, then probabilities

  for (size_t r = 0; r < rows; ++r) {
    const int64_t h = kv_h * group + static_cast<int64_t>(r) / p.tq;
    const int64_t i = static_cast<int64_t>(r) % p.tq;
    const float* row = p.q + b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
    for (size_t e = 0; e < ld; ++e) qs[r * ld + e] = e < d ? row[e] * p.scale : 0.0f;
    m[r] = kMinusInf;
    l[r] = 0.0f;
    std::fill(o + r * ldo, o + r * ldo + ldo, 0.0f);
  }
  const int64_t head_base = (b * p.kv_heads + kv_h) * p.capacity;
  const int64_t first_query = p.position - p.tq;

  // Offset of the cached row at absolute position j0 + c, without a division per key (a 64-bit
  // `%` per key cost ~40 cycles, more than the rest of the key's work).
  std::vector<size_t> offsets(kKeys);
  // Absolute position of each row's query: row r is new token r mod Tq (computed once: an
  // integer % per key and row cost more than the key's arithmetic).
  std::vector<int64_t> row_position(rows);
  for (size_t r = 0; r < rows; ++r) row_position[r] = first_query + static_cast<int64_t>(r) % p.tq;
  for (int64_t j0 = p0; j0 < p1; j0 += static_cast<int64_t>(kKeys)) {
    const size_t cols = static_cast<size_t>(std::min<int64_t>(kKeys, p1 - j0));
    int64_t slot = j0 % p.capacity;
    for (size_t c = 0; c < cols; ++c, ++slot) {
      if (slot == p.capacity) slot = 0;  // the ring wraps
      offsets[c] = static_cast<size_t>((head_base + slot) * p.d);
    }
    // Scores: each key row loaded once, dotted with every query row. Two accumulators halve
    // the FMA dependency chain.
    for (size_t c = 0; c < cols; ++c) {
      const int64_t position = j0 + static_cast<int64_t>(c);
      const size_t offset = offsets[c];
      for (size_t r = 0; r < rows; ++r) {
        VF even = hn::Zero(df), odd = hn::Zero(df);
        size_t e = 0;
        for (; e + 2 * N <= ld; e += 2 * N) {
          even = hn::MulAdd(hn::LoadU(df, qs + r * ld + e), LoadRow(df, p.k, p.bf16, offset + e), even);
          odd = hn::MulAdd(hn::LoadU(df, qs + r * ld + e + N), LoadRow(df, p.k, p.bf16, offset + e + N), odd);
        }
        if (e < ld) even = hn::MulAdd(hn::LoadU(df, qs + r * ld + e), LoadRow(df, p.k, p.bf16, offset + e), even);
        const int64_t query_position = row_position[r];
        const bool visible = position <= query_position &&
                             (p.window == 0 || position > query_position - p.window);
        s[r * kKeys + c] = visible ? hn::GetLane(hn::SumOfLanes(df, hn::Add(even, odd))) : kMinusInf;
      }
    }
    // Online softmax per row over this block of keys (kKeys is a multiple of any N; the
    // columns past `cols` are -inf, so they come out 0).
    for (size_t r = 0; r < rows; ++r) {
      float* sr = s + r * kKeys;
      std::fill(sr + cols, sr + kKeys, kMinusInf);
      VF vmax = hn::Set(df, kMinusInf);
      for (size_t c = 0; c < kKeys; c += N) vmax = hn::Max(vmax, hn::LoadU(df, sr + c));
      const float block_max = hn::GetLane(hn::MaxOfLanes(df, vmax));
      if (block_max == kMinusInf) {
        std::fill(sr, sr + kKeys, 0.0f);
        continue;
      }
      const float new_max = std::max(m[r], block_max);
      const VF shift = hn::Set(df, new_max);
      VF vsum = hn::Zero(df);
      for (size_t c = 0; c < kKeys; c += N) {
        const VF e = ExpFlushed(df, hn::Sub(hn::LoadU(df, sr + c), shift));
        hn::StoreU(e, df, sr + c);
        vsum = hn::Add(vsum, e);
      }
      const float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
      const float alpha = m[r] - new_max < -64.0f ? 0.0f : std::exp(m[r] - new_max);
      l[r] = alpha * l[r] + sum;
      if (alpha != 1.0f) {
        const VF va = hn::Set(df, alpha);
        for (size_t e = 0; e < ldo; e += N) hn::StoreU(hn::Mul(va, hn::LoadU(df, o + r * ldo + e)), df, o + r * ldo + e);
      }
      m[r] = new_max;
    }
    // o += P·V. Per row, up to four vectors of o stay in registers across the block's keys:
    // updating o in memory key by key chained every FMA behind a store-to-load forward (that
    // version took ~45 cycles per key on one cached head). Value rows come from L1 after the
    // first query row.
    for (size_t r = 0; r < rows; ++r) {
      const float* pr = s + r * kKeys;
      float* orow = o + r * ldo;
      for (size_t e = 0; e < ld; e += 4 * N) {
        // The vector count is a template argument so the accumulators stay in registers
        // (with a run-time count they were spilled, ~6 ns per key).
        switch (std::min<size_t>(4, (ld - e) / N)) {
          case 4: AccumulateValues<4>(pr, cols, p, offsets.data(), e, orow + e); break;
          case 3: AccumulateValues<3>(pr, cols, p, offsets.data(), e, orow + e); break;
          case 2: AccumulateValues<2>(pr, cols, p, offsets.data(), e, orow + e); break;
          default: AccumulateValues<1>(pr, cols, p, offsets.data(), e, orow + e); break;
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(DecodeChunk);

size_t decode_row_floats(const DecodeProblem& p) {
  return static_cast<size_t>((p.d + 63) / 64 * 64);
}

size_t decode_partial_floats(const DecodeProblem& p) {
  const auto rows = static_cast<size_t>(p.heads / p.kv_heads * p.tq);
  return rows * (2 + decode_row_floats(p));
}

size_t decode_scratch_floats(const DecodeProblem& p) {
  const auto rows = static_cast<size_t>(p.heads / p.kv_heads * p.tq);
  return rows * (decode_row_floats(p) + 64);
}

void decode_chunk(const DecodeProblem& p, int64_t b, int64_t kv_h, int64_t p0, int64_t p1,
                  float* partial, float* scratch) {
  HWY_DYNAMIC_DISPATCH(DecodeChunk)(p, b, kv_h, p0, p1, partial, scratch);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
