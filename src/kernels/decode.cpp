// The decode kernel: scores of g·Tq query rows against one chunk of cached positions, the
// online softmax, and o += P·V, reading each cached key and value once for all the rows that
// share it (the g query heads of a group and the Tq new tokens). Decoding is bound by the
// bytes of K and V streamed from memory, so the loop is shaped around one pass over them:
// for each key, its d values are loaded once (widened in registers from bfloat16, or from int8
// when the cache stores q8: then the row's scale multiplies the key's score, and folds into its
// probability for the value row) and dotted with every row.
//
// Prefetch: for float rows none — asking for a block's value rows before scoring its keys
// (four lines a key) made the step slower on the AVX-512 machine (L = 1k on two threads 62 µs
// with it, 55 without), and asking for the next block's rows made L = 64k slower on a Zen 2
// (25–28 → 29–35 ms): the hardware follows the streams by itself. A bf16 or q8 row is one or
// two lines, and there one core left memory idle while it computed (q8, Zen 2, L = 64k: 19 ms
// on one thread against 10 for the same keys in cache), so those ask for the next block's rows
// while the current block computes, a row a key: q8 10.5–10.6 → 8.7–8.9 ms on two threads,
// bf16 17.7–18.4 → 15.9. They are asked into L2, not L1 (prefetcht1, not t0): on a Zen 4 at
// L = 64k on two threads, five runs of the three taking turns, t0 made bf16 slower than no
// prefetch at all (10.2–11.2 ms against 9.1–10.1; t1 9.5–10.4), and q8 took 5.5–6.8 ms with
// t0, 5.4–7.2 with none, 4.5–5.7 with t1; at L = 4k–16k, in L3, t1 was the fastest of the
// three for both. Float rows that hold every head of a position (packed batches, pages) are a
// different case, taken a chunk of all heads at a time: DecodeChunkAllHeads below.
#include "src/kernels/decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/decode.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "attn/bfloat16.hpp"
#include "hwy/highway.h"
#include "src/kernels/reductions.hpp"
#include "src/kernels/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// Vector at `offset` of the cache storage (in elements: bytes for q8), widened to float. The
// storage type is a template argument: a run-time flag inside the inner loops was re-read
// after every store.
template <Dtype kStorage>
HWY_INLINE VF LoadRow(DF df, const void* base, size_t offset) {
  if constexpr (kStorage == Dtype::kBFloat16) {
    const hn::Rebind<hwy::bfloat16_t, DF> dbf;
    return hn::PromoteTo(df, hn::LoadU(dbf, static_cast<const hwy::bfloat16_t*>(base) + offset));
  } else if constexpr (kStorage == Dtype::kQ8) {
    const hn::Rebind<int8_t, DF> d8;
    const hn::Rebind<int32_t, DF> d32;
    return hn::ConvertTo(
        df, hn::PromoteTo(d32, hn::LoadU(d8, static_cast<const int8_t*>(base) + offset)));
  } else {
    return hn::LoadU(df, static_cast<const float*>(base) + offset);
  }
}

// The factor a row's widened values carry: a q8 row's scale, stored after its d values as
// bfloat16 bits; 1 for the other storages (a constant the compiler folds away).
template <Dtype kStorage>
HWY_INLINE float RowScale(const void* base, size_t offset, size_t d) {
  if constexpr (kStorage == Dtype::kQ8) {
    uint16_t scale;
    std::memcpy(&scale, static_cast<const int8_t*>(base) + offset + d, sizeof scale);
    return from_bfloat16(scale);
  } else {
    return 1.0f;
  }
}

// The rows of the next block of keys (or values), asked for one row's lines per key of this
// block, so that memory streams them into L2 while this block computes; base = nullptr asks
// nothing.
struct PrefetchAhead {
  const char* base;
  size_t pitch;  // bytes
  HWY_INLINE void row(size_t c) const {
    if (base == nullptr) return;
    for (size_t byte = c * pitch; byte < (c + 1) * pitch; byte += 64) {
      __builtin_prefetch(base + byte, /*read*/ 0, /*locality: L2 and out*/ 2);
    }
  }
};
constexpr PrefetchAhead kNoPrefetch{nullptr, 0};

// q · K[row c]: the NV vectors of the products, summed into one vector (two accumulators
// halve the FMA dependency chain).
template <Dtype kStorage, size_t NV>
HWY_INLINE VF KeyProducts(DF df, const VF* qv, const void* keys, size_t at) {
  const size_t N = hn::Lanes(df);
  VF even = hn::Mul(qv[0], LoadRow<kStorage>(df, keys, at));
  VF odd = NV > 1 ? hn::Mul(qv[NV > 1 ? 1 : 0], LoadRow<kStorage>(df, keys, at + N)) : hn::Zero(df);
#pragma GCC unroll 8
  for (size_t x = 2; x < NV; x += 2) {
    even = hn::MulAdd(qv[x], LoadRow<kStorage>(df, keys, at + x * N), even);
    odd = hn::MulAdd(qv[x + 1], LoadRow<kStorage>(df, keys, at + (x + 1) * N), odd);
  }
  return hn::Add(even, odd);
}

// sr[c] = q · K[row c] for c in [first, last), the NV vectors of q held in registers. (Four
// keys sharing one horizontal reduction — interleaves within 128-bit blocks, then the blocks
// added through memory — was no faster for f32 and made the bf16 step 1.5× slower: 9.6
// instead of 6.0 ms at L = 64k on two threads.)
template <Dtype kStorage, size_t NV, class Rows>
HWY_INLINE void ScoreKeys(const float* q, const void* keys, const Rows& offsets, size_t d,
                          int64_t first, int64_t last, float* sr, const PrefetchAhead& ahead) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF qv[NV];
#pragma GCC unroll 8
  for (size_t x = 0; x < NV; ++x) qv[x] = hn::LoadU(df, q + x * N);
  for (int64_t c = first; c < last; ++c) {
    ahead.row(static_cast<size_t>(c));
    const float dot =
        hn::GetLane(hn::SumOfLanes(df, KeyProducts<kStorage, NV>(df, qv, keys, offsets[c])));
    sr[c] = RowScale<kStorage>(keys, offsets[c], d) * dot;
  }
}

// The same for any number of vectors (head dims that are not 1, 2, 4 or 8 vectors).
template <Dtype kStorage, class Rows>
HWY_INLINE void ScoreKeysAnyWidth(const float* q, size_t ld, const void* keys, const Rows& offsets,
                                  size_t d, int64_t first, int64_t last, float* sr,
                                  const PrefetchAhead& ahead) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (int64_t c = first; c < last; ++c) {
    ahead.row(static_cast<size_t>(c));
    VF acc = hn::Zero(df);
    for (size_t e = 0; e < ld; e += N) {
      acc = hn::MulAdd(hn::LoadU(df, q + e), LoadRow<kStorage>(df, keys, offsets[c] + e), acc);
    }
    sr[c] = RowScale<kStorage>(keys, offsets[c], d) * hn::GetLane(hn::SumOfLanes(df, acc));
  }
}

// q8 keys: q · K[row c] in integers. Widening every key value to float took a conversion per
// value, on the one port of a Zen 2 that converts. Instead the scaled query row is rounded once
// per task to int16 (QueryLevels steps per max|q|, so each query value is within 2^-15 of the
// row's largest: ~100× finer than the key's own int8 rounding), the keys are widened int8 →
// int16, and pairs of products are summed into int32 lanes (vpmaddwd on x86); one conversion
// per key remains, at the end. (Zen 2, 2 heads × 1k keys in cache, one thread: 21–22 → 19 µs
// a step.)
// (Not on HWY_SCALAR, whose one-lane vectors cannot pair int16 products: there the keys are
// widened to float like the other storages.)
using DI16 = hn::Repartition<int16_t, DF>;
using DI32 = hn::Repartition<int32_t, DF>;
constexpr bool kIntegerKeyProducts = HWY_TARGET != HWY_SCALAR;

// The int16 query's largest level: 2^14 − 1, or less when d·level·127 could pass INT32_MAX.
inline int32_t QueryLevels(size_t padded_d) {
  const int64_t fits = (int64_t{1} << 31) / (127 * static_cast<int64_t>(padded_d)) - 1;
  return static_cast<int32_t>(std::min<int64_t>(16383, fits));
}

#if HWY_TARGET != HWY_SCALAR
// Lane i of the result: the sum of acc[i]'s lanes, for as many accumulators as a vector has
// int32 lanes (4, 8 or 16) — one transposing tree of adds and shuffles for all of them, where a
// sum per accumulator is a chain of shuffles each. Within each 128-bit block first (four
// accumulators to a vector), then across the blocks.
HWY_INLINE hn::Vec<DI32> SumsOfLanes(const hn::Vec<DI32>* acc) {
  const DI32 d32;
  const hn::Repartition<int64_t, DI32> d64;
  constexpr size_t kN = HWY_LANES(int32_t);
  hn::Vec<DI32> quads[kN / 4];  // quads[g] block j lane i: the sum of acc[4g + i]'s block j
  for (size_t g = 0; g < kN / 4; ++g) {
    const auto* a = acc + 4 * g;
    const auto pairs01 =
        hn::Add(hn::InterleaveLower(d32, a[0], a[1]), hn::InterleaveUpper(d32, a[0], a[1]));
    const auto pairs23 =
        hn::Add(hn::InterleaveLower(d32, a[2], a[3]), hn::InterleaveUpper(d32, a[2], a[3]));
    const auto p01 = hn::BitCast(d64, pairs01), p23 = hn::BitCast(d64, pairs23);
    quads[g] = hn::Add(hn::BitCast(d32, hn::InterleaveLower(d64, p01, p23)),
                       hn::BitCast(d32, hn::InterleaveUpper(d64, p01, p23)));
  }
  if constexpr (kN == 4) {
    return quads[0];
  } else if constexpr (kN == 8) {  // two blocks: each quad's halves added
    return hn::Add(hn::ConcatLowerLower(d32, quads[1], quads[0]),
                   hn::ConcatUpperUpper(d32, quads[1], quads[0]));
  } else {  // four blocks: halves added, then adjacent blocks; quads 0, 2 and 1, 3 side by side
    auto even = hn::Add(hn::ConcatLowerLower(d32, quads[2], quads[0]),
                        hn::ConcatUpperUpper(d32, quads[2], quads[0]));
    auto odd = hn::Add(hn::ConcatLowerLower(d32, quads[3], quads[1]),
                       hn::ConcatUpperUpper(d32, quads[3], quads[1]));
    even = hn::Add(even, hn::SwapAdjacentBlocks(even));  // blocks: sums of quads 0, 0, 2, 2
    odd = hn::Add(odd, hn::SwapAdjacentBlocks(odd));     // 1, 1, 3, 3
    return hn::OddEvenBlocks(odd, even);                 // 0, 1, 2, 3
  }
}

// sr[c] = scale · (q16 · K[row c]), K's int8 widened to int16: NV16 vectors of int16 (0 for
// any count, read from nv16). Keys a vector's int32 lanes at a time (16 with AVX-512), each
// in an accumulator of its own, their sums reduced together (SumsOfLanes): one horizontal sum
// per key was most of a key's time (Zen 4, one L2-resident head, ~6.4 ns a key with values);
// the integer sums are exact, so the scores are the same bits either way.
template <size_t NV16, class Rows>
HWY_INLINE void ScoreKeysQ8(const int16_t* q16, size_t nv16, float query_scale, const void* keys,
                            const Rows& offsets, size_t d, int64_t first, int64_t last, float* sr,
                            const PrefetchAhead& ahead) {
  const DI16 d16;
  const DI32 d32;
  const DF df;
  const hn::Rebind<int8_t, DI16> d8;
  const size_t N16 = hn::Lanes(d16);
  const size_t count = NV16 > 0 ? NV16 : nv16;
  const auto* base = static_cast<const int8_t*>(keys);
  constexpr auto kGroup = static_cast<int64_t>(HWY_LANES(int32_t));
  int64_t c = first;
  for (; c + kGroup <= last; c += kGroup) {
    hn::Vec<DI32> acc[kGroup];
#pragma GCC unroll 16
    for (int64_t g = 0; g < kGroup; ++g) {
      ahead.row(static_cast<size_t>(c + g));
      const int8_t* row = base + offsets[c + g];
      auto sum = hn::Zero(d32), unused = hn::Zero(d32);
#pragma GCC unroll 8
      for (size_t x = 0; x < count; ++x) {
        sum = hn::ReorderWidenMulAccumulate(d32, hn::LoadU(d16, q16 + x * N16),
                                            hn::PromoteTo(d16, hn::LoadU(d8, row + x * N16)), sum,
                                            unused);
      }
      acc[g] = hn::Add(sum, unused);  // (unused stays 0 on x86; elsewhere it holds half)
    }
    hn::StoreU(hn::ConvertTo(df, SumsOfLanes(acc)), df, sr + c);
    for (int64_t g = c; g < c + kGroup; ++g)
      sr[g] = query_scale * RowScale<Dtype::kQ8>(keys, offsets[g], d) * sr[g];
  }
  for (; c < last; ++c) {  // the last keys of fewer than a group
    ahead.row(static_cast<size_t>(c));
    const int8_t* row = base + offsets[c];
    auto even = hn::Zero(d32), odd = hn::Zero(d32), unused = hn::Zero(d32);
#pragma GCC unroll 8
    for (size_t x = 0; x < count; x += 2) {
      even = hn::ReorderWidenMulAccumulate(d32, hn::LoadU(d16, q16 + x * N16),
                                           hn::PromoteTo(d16, hn::LoadU(d8, row + x * N16)), even,
                                           unused);
      if (x + 1 < count) {
        odd = hn::ReorderWidenMulAccumulate(d32, hn::LoadU(d16, q16 + (x + 1) * N16),
                                            hn::PromoteTo(d16, hn::LoadU(d8, row + (x + 1) * N16)),
                                            odd, unused);
      }
    }
    // (unused stays 0 on x86, whose int16 pairs add within a lane; elsewhere it holds half.)
    const int32_t dot = hn::GetLane(hn::SumOfLanes(d32, hn::Add(hn::Add(even, odd), unused)));
    sr[c] = query_scale * RowScale<Dtype::kQ8>(keys, offsets[c], d) * static_cast<float>(dot);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// o[0 .. NV·N) += Σ_c pr[c] · V[row c][e .. e + NV·N), with o in registers throughout (a q8
// row's scale folded into pr[c]). Each accumulator is a chain of dependent FMAs, one per key:
// with NV ≤ 4 of them a key waits on the FMA latency (4–5 cycles), so then even and odd keys go
// to two sets, summed at the end, for eight chains. (With this and 8 vectors in one pass, a
// float step of 2 heads × 1k keys in cache on one Zen 2 thread went from 25–29 to 22 µs.)
template <Dtype kStorage, size_t NV, class Rows>
HWY_INLINE void AccumulateValues(const float* pr, size_t cols, const void* values,
                                 const Rows& offsets, size_t d, size_t e, float* o,
                                 const PrefetchAhead& ahead) {
  const DF df;
  const size_t N = hn::Lanes(df);
  constexpr size_t kSets = NV <= 4 ? 2 : 1;
  VF acc[kSets][NV];
#pragma GCC unroll 8
  for (size_t x = 0; x < NV; ++x) {
    acc[0][x] = hn::LoadU(df, o + x * N);
    if constexpr (kSets == 2) acc[1][x] = hn::Zero(df);
  }
  size_t c = 0;
  for (; c + kSets <= cols; c += kSets) {
#pragma GCC unroll 2
    for (size_t set = 0; set < kSets; ++set) {
      ahead.row(c + set);
      const size_t at = offsets[c + set];
      const VF pc = hn::Set(df, pr[c + set] * RowScale<kStorage>(values, at, d));
#pragma GCC unroll 8
      for (size_t x = 0; x < NV; ++x) {
        acc[set][x] = hn::MulAdd(pc, LoadRow<kStorage>(df, values, at + e + x * N), acc[set][x]);
      }
    }
  }
  for (; c < cols; ++c) {  // an odd last key
    ahead.row(c);
    const VF pc = hn::Set(df, pr[c] * RowScale<kStorage>(values, offsets[c], d));
#pragma GCC unroll 8
    for (size_t x = 0; x < NV; ++x) {
      acc[0][x] = hn::MulAdd(pc, LoadRow<kStorage>(df, values, offsets[c] + e + x * N), acc[0][x]);
    }
  }
#pragma GCC unroll 8
  for (size_t x = 0; x < NV; ++x) {
    if constexpr (kSets == 2) acc[0][x] = hn::Add(acc[0][x], acc[1][x]);
    hn::StoreU(acc[0][x], df, o + x * N);
  }
}

// Where the cached row of key c of a block starts in the storage, in elements (bytes for q8). A
// block inside the ring is consecutive slots: first + c·pitch, which the loops turn into a pointer
// increment (a table of offsets cost a multiply and a load per key, about 6 % of the step);
// only a block across the ring's end (sliding window) or a page's end takes the table.
struct ConsecutiveRows {
  size_t first, stride;
  size_t operator[](size_t c) const { return first + c * stride; }
};
struct TabledRows {
  const size_t* offsets;
  size_t shift;  // another head's rows of the same positions: shift elements on
  size_t operator[](size_t c) const { return offsets[c] + shift; }
};

// One task's state: its rows (the g·Tq queries of a cached head), their scaled queries and
// scores, and the partial softmax state m, l, o.
struct ChunkState {
  size_t rows, d, ld, ldo;
  const int64_t* row_position;  // absolute position of each row's query
  int64_t window;
  float softcap;           // 0 = off
  const float* row_slope;  // ALiBi's slope of each row's head, or nullptr
  const float* qs;         // rows × ld, scaled, zero-padded
  const int16_t* q16;      // q8 keys: qs rounded, rows × ld16, and each row's step
  const float* q16_scale;
  size_t ld16;
  float* s;  // rows × kDecodeKeyBlock scores, then probabilities
  float *m, *l, *o;
};

// Soft-capping (s → c·tanh(s / c)) and ALiBi (s −= slope·(position − j)) on row r's scores of
// keys j0 + [first, last), the keys it sees (the others stay -inf). Whole vectors, then the
// last few keys one at a time.
void ScoreVariantsOfRow(const ChunkState& t, size_t r, int64_t j0, size_t first, size_t last,
                        float* sr) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const float cap = t.softcap, slope = t.row_slope != nullptr ? t.row_slope[r] : 0.0f;
  // position − j for key first + c: start − c.
  const auto start = static_cast<float>(t.row_position[r] - j0 - static_cast<int64_t>(first));
  const VF v_cap = hn::Set(df, cap), v_inverse = hn::Set(df, cap > 0.0f ? 1.0f / cap : 0.0f);
  const VF v_slope = hn::Set(df, -slope), lanes = hn::Iota(df, 0.0f);
  size_t c = first;
  for (; c + N <= last; c += N) {
    VF s = hn::LoadU(df, sr + c);
    if (cap > 0.0f) s = hn::Mul(v_cap, TanhRational(df, hn::Mul(s, v_inverse)));
    const VF distance =
        hn::Sub(hn::Set(df, start - static_cast<float>(c - first)), lanes);  // ≥ 0: causal
    hn::StoreU(hn::MulAdd(v_slope, distance, s), df, sr + c);
  }
  for (; c < last; ++c) {
    float s = sr[c];
    if (cap > 0.0f) s = cap * std::tanh(s / cap);
    sr[c] = s - slope * (start - static_cast<float>(c - first));
  }
}

// Scores and the online softmax step for the keys j0 .. j0 + cols − 1 of one block: t.s holds
// the block's probabilities after, and t.m, t.l and t.o are rescaled to the new maxima.
template <Dtype kStorage, class Rows>
void ScoreBlock(const ChunkState& t, const void* keys, const Rows& offsets, int64_t j0, size_t cols,
                const PrefetchAhead& next_keys) {
  const DF df;
  const size_t N = hn::Lanes(df);
  // Scores, row by row: the keys a row may see in this block are a contiguous range
  // (causal and window by absolute position), the others get -inf.
  for (size_t r = 0; r < t.rows; ++r) {
    const PrefetchAhead& key_ahead = r == 0 ? next_keys : kNoPrefetch;  // once per block
    const int64_t query_position = t.row_position[r];
    int64_t first = 0,
            last = std::min<int64_t>(static_cast<int64_t>(cols), query_position - j0 + 1);
    if (t.window > 0) first = std::clamp<int64_t>(query_position - t.window + 1 - j0, 0, last);
    float* sr = t.s + r * kDecodeKeyBlock;
    for (int64_t c = 0; c < first; ++c) sr[c] = kMinusInf;
    for (int64_t c = std::max<int64_t>(last, 0); c < static_cast<int64_t>(cols); ++c)
      sr[c] = kMinusInf;
    if (last <= first) continue;
    const float* qr = t.qs + r * t.ld;
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kStorage == Dtype::kQ8) {
      const int16_t* q16 = t.q16 + r * t.ld16;
      const size_t nv16 = t.ld16 / hn::Lanes(DI16());
      switch (nv16) {
        case 1:
          ScoreKeysQ8<1>(q16, nv16, t.q16_scale[r], keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        case 2:
          ScoreKeysQ8<2>(q16, nv16, t.q16_scale[r], keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        case 4:
          ScoreKeysQ8<4>(q16, nv16, t.q16_scale[r], keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        default:
          ScoreKeysQ8<0>(q16, nv16, t.q16_scale[r], keys, offsets, t.d, first, last, sr, key_ahead);
          break;
      }
    } else
#endif
    {
      switch (t.ld / N) {  // the query row stays in registers across the keys
        case 1:
          ScoreKeys<kStorage, 1>(qr, keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        case 2:
          ScoreKeys<kStorage, 2>(qr, keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        case 4:
          ScoreKeys<kStorage, 4>(qr, keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        case 8:
          ScoreKeys<kStorage, 8>(qr, keys, offsets, t.d, first, last, sr, key_ahead);
          break;
        default:
          ScoreKeysAnyWidth<kStorage>(qr, t.ld, keys, offsets, t.d, first, last, sr, key_ahead);
          break;
      }
    }
    if (t.softcap > 0.0f || t.row_slope != nullptr) {
      ScoreVariantsOfRow(t, r, j0, static_cast<size_t>(first), static_cast<size_t>(last), sr);
    }
  }
  // Online softmax per row over the block's keys, in whole vectors (the columns past `cols`
  // are set to -inf, so they come out 0).
  const size_t width = round_up(cols, N);
  for (size_t r = 0; r < t.rows; ++r) {
    float* sr = t.s + r * kDecodeKeyBlock;
    std::fill(sr + cols, sr + width, kMinusInf);
    VF vmax = hn::Set(df, kMinusInf);
    for (size_t c = 0; c < width; c += N) vmax = hn::Max(vmax, hn::LoadU(df, sr + c));
    const float block_max = hn::GetLane(hn::MaxOfLanes(df, vmax));
    if (block_max == kMinusInf) {
      std::fill(sr, sr + width, 0.0f);
      continue;
    }
    const float new_max = std::max(t.m[r], block_max);
    const VF shift = hn::Set(df, new_max);
    VF vsum = hn::Zero(df);
    for (size_t c = 0; c < width; c += N) {
      const VF e = ExpFlushed(df, hn::Sub(hn::LoadU(df, sr + c), shift));
      hn::StoreU(e, df, sr + c);
      vsum = hn::Add(vsum, e);
    }
    const float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
    const float alpha = t.m[r] - new_max < -64.0f ? 0.0f : std::exp(t.m[r] - new_max);
    t.l[r] = alpha * t.l[r] + sum;
    if (alpha != 1.0f) {
      const VF va = hn::Set(df, alpha);
      float* orow = t.o + r * t.ldo;
      for (size_t e = 0; e < t.ldo; e += N)
        hn::StoreU(hn::Mul(va, hn::LoadU(df, orow + e)), df, orow + e);
    }
    t.m[r] = new_max;
  }
}

// o += P·V for the block ScoreBlock scored.
template <Dtype kStorage, class Rows>
void AccumulateBlock(const ChunkState& t, const void* values, const Rows& offsets, size_t cols,
                     const PrefetchAhead& next_values) {
  const DF df;
  const size_t N = hn::Lanes(df);
  // o += P·V. Per row, up to eight vectors of o stay in registers across the block's keys:
  // updating o in memory key by key chained every FMA behind a store-to-load forward (that
  // version took ~45 cycles per key on one cached head). Eight vectors cover d = 64 on AVX2 in
  // one pass over the value rows (two passes of four read the block's 64 KiB of float rows
  // twice, the second time from L2). Value rows come from cache after the first query row.
  for (size_t r = 0; r < t.rows; ++r) {
    const PrefetchAhead& value_ahead = r == 0 ? next_values : kNoPrefetch;
    const float* pr = t.s + r * kDecodeKeyBlock;
    float* orow = t.o + r * t.ldo;
    for (size_t e = 0; e < t.ld;) {
      // The vector count is a template argument so the accumulators stay in registers
      // (with a run-time count they were spilled, ~6 ns per key).
      const size_t left = (t.ld - e) / N;
      const PrefetchAhead& ahead = e == 0 ? value_ahead : kNoPrefetch;
      if (left >= 8) {
        AccumulateValues<kStorage, 8>(pr, cols, values, offsets, t.d, e, orow + e, ahead);
        e += 8 * N;
      } else if (left >= 4) {
        AccumulateValues<kStorage, 4>(pr, cols, values, offsets, t.d, e, orow + e, ahead);
        e += 4 * N;
      } else if (left == 3) {
        AccumulateValues<kStorage, 3>(pr, cols, values, offsets, t.d, e, orow + e, ahead);
        e += 3 * N;
      } else if (left == 2) {
        AccumulateValues<kStorage, 2>(pr, cols, values, offsets, t.d, e, orow + e, ahead);
        e += 2 * N;
      } else {
        AccumulateValues<kStorage, 1>(pr, cols, values, offsets, t.d, e, orow + e, ahead);
        e += N;
      }
    }
  }
}

// Scores, online softmax and o += P·V for the keys j0 .. j0 + cols − 1 of one block.
template <Dtype kStorage, class Rows>
void DecodeBlock(const ChunkState& t, const void* keys, const void* values, const Rows& offsets,
                 int64_t j0, size_t cols, const PrefetchAhead& next_keys,
                 const PrefetchAhead& next_values) {
  ScoreBlock<kStorage>(t, keys, offsets, j0, cols, next_keys);
  AccumulateBlock<kStorage>(t, values, offsets, cols, next_values);
}

// The rows of cached head (b, kv_h) — the g·Tq queries that share it — made ready for a task:
// their scaled queries (and q8's int16 queries) in `scratch`, their positions and slopes, and
// their partial state m, l, o in `partial` started empty.
struct HeadRows {
  std::vector<int64_t> position;  // absolute position of each row's query
  std::vector<float> slope;       // ALiBi's slope of each row's head
  std::vector<int16_t> q16;
  std::vector<float> q16_scale;
};

template <Dtype kStorage>
ChunkState PrepareHead(const DecodeProblem& p, int64_t b, int64_t kv_h, float* partial,
                       float* scratch, HeadRows& own) {
  const size_t N = hn::Lanes(DF());
  const int64_t group = p.heads / p.kv_heads;
  const size_t rows = static_cast<size_t>(group * p.tq);
  const size_t d = static_cast<size_t>(p.d), ld = round_up(d, N);
  const size_t ldo = round_up(d, 64);  // matches decode_row_floats
  float* qs = scratch;
  // Row r is new token r mod Tq (computed once: an integer % per key and row cost more than
  // the key's arithmetic). Kept by the caller per thread, so that a task allocates nothing.
  own.position.resize(rows);
  own.slope.resize(rows);
  const bool integer_keys = kStorage == Dtype::kQ8 && kIntegerKeyProducts;
  const size_t ld16 = integer_keys ? round_up(d, hn::Lanes(DI16())) : 0;
  own.q16.resize(rows * ld16);
  own.q16_scale.resize(rows);
  const ChunkState t{rows,
                     d,
                     ld,
                     ldo,
                     own.position.data(),
                     p.window,
                     p.softcap,
                     p.alibi_slopes != nullptr ? own.slope.data() : nullptr,
                     qs,
                     own.q16.data(),
                     own.q16_scale.data(),
                     ld16,
                     qs + rows * ld,
                     partial,
                     partial + rows,
                     partial + 2 * rows};

  for (size_t r = 0; r < rows; ++r) {
    const int64_t h = kv_h * group + static_cast<int64_t>(r) / p.tq;
    const int64_t i = static_cast<int64_t>(r) % p.tq;
    const float* row = p.q + b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
    for (size_t e = 0; e < ld; ++e) qs[r * ld + e] = e < d ? row[e] * p.scale : 0.0f;
    t.m[r] = kMinusInf;
    t.l[r] = 0.0f;
    std::fill(t.o + r * ldo, t.o + r * ldo + ldo, 0.0f);
    own.position[r] = p.position - p.tq + i;
    if (p.alibi_slopes != nullptr) own.slope[r] = p.alibi_slopes[h];
    if (integer_keys) {
      const float* scaled = qs + r * ld;
      float largest = 0.0f;
      for (size_t e = 0; e < d; ++e) largest = std::max(largest, std::fabs(scaled[e]));
      const auto levels = static_cast<float>(QueryLevels(ld16));
      const float step = largest / levels, inverse = largest > 0.0f ? levels / largest : 0.0f;
      for (size_t e = 0; e < ld16; ++e) {
        own.q16[r * ld16 + e] =
            e < d ? static_cast<int16_t>(std::nearbyint(scaled[e] * inverse)) : int16_t{0};
      }
      own.q16_scale[r] = step;
    }
  }
  return t;
}

// Where the rows of a problem's positions lie: position j's row of cached head kv_h starts at
// at(j, kv_h) elements of the storage (bytes for q8), and the run of consecutive rows it is in
// ends before position run_end(j): a page's end in a paged cache, the ring's end otherwise.
template <Dtype kStorage>
struct RowLayout {
  const DecodeProblem& p;
  int64_t b;
  // A row's pitch in the storage's elements: d, or for q8 the bytes of d values and a scale; or
  // the caller's stride for float rows laid out otherwise (DecodeProblem::kv_stride).
  bool strided = kStorage == Dtype::kFloat32 && p.kv_stride[2] != 0;
  bool paged = strided && p.page_table != nullptr;
  int64_t pitch = strided                  ? p.kv_stride[2]
                  : kStorage == Dtype::kQ8 ? kv_row_bytes(kStorage, p.d)
                                           : p.d;

  // Where the head's slot 0 starts, in pitches (the cache's layout: B, Hkv, capacity).
  int64_t head_base(int64_t kv_h) const { return (b * p.kv_heads + kv_h) * p.capacity; }
  size_t at(int64_t j, int64_t kv_h) const {
    if (paged) {
      return static_cast<size_t>(p.page_table[j / p.page_size] * p.page_stride +
                                 kv_h * p.kv_stride[1] + j % p.page_size * pitch);
    }
    const int64_t head_start =
        strided ? b * p.kv_stride[0] + kv_h * p.kv_stride[1] : head_base(kv_h) * pitch;
    return static_cast<size_t>(head_start + j % p.capacity * pitch);
  }
  int64_t run_end(int64_t j) const {
    return paged ? (j / p.page_size + 1) * p.page_size : j - j % p.capacity + p.capacity;
  }
};

template <Dtype kStorage>
void DecodeChunkOf(const DecodeProblem& p, int64_t b, int64_t kv_h, int64_t p0, int64_t p1,
                   float* partial, float* scratch) {
  thread_local HeadRows own;
  const ChunkState t = PrepareHead<kStorage>(p, b, kv_h, partial, scratch, own);
  const RowLayout<kStorage> layout{p, b};
  const int64_t row_bytes = kv_row_bytes(kStorage, p.d);
  thread_local std::vector<size_t> offsets;
  for (int64_t j0 = p0; j0 < p1; j0 += static_cast<int64_t>(kDecodeKeyBlock)) {
    const size_t cols = static_cast<size_t>(std::min<int64_t>(kDecodeKeyBlock, p1 - j0));
    if (j0 + static_cast<int64_t>(cols) <= layout.run_end(j0)) {  // one division per block
      // The next block's rows, while they are the next slots of this head and held: bf16 and
      // q8 rows only (see the opening comment), which are never paged.
      PrefetchAhead next_keys = kNoPrefetch, next_values = kNoPrefetch;
      const int64_t next_slot = j0 % p.capacity + static_cast<int64_t>(cols);
      if (kStorage != Dtype::kFloat32 && j0 + static_cast<int64_t>(cols) < p.position &&
          next_slot + static_cast<int64_t>(cols) <= p.capacity) {
        const auto at = static_cast<size_t>((layout.head_base(kv_h) + next_slot) * row_bytes);
        next_keys = {static_cast<const char*>(p.k) + at, static_cast<size_t>(row_bytes)};
        next_values = {static_cast<const char*>(p.v) + at, static_cast<size_t>(row_bytes)};
      }
      DecodeBlock<kStorage>(t, p.k, p.v,
                            ConsecutiveRows{layout.at(j0, kv_h), static_cast<size_t>(layout.pitch)},
                            j0, cols, next_keys, next_values);
      continue;
    }
    // A block across the ring's end (sliding window) or a page's end: each key's row looked up.
    offsets.resize(cols);
    for (size_t c = 0; c < cols; ++c) offsets[c] = layout.at(j0 + static_cast<int64_t>(c), kv_h);
    DecodeBlock<kStorage>(t, p.k, p.v, TabledRows{offsets.data(), 0}, j0, cols, kNoPrefetch,
                          kNoPrefetch);
  }
}

// Whether float rows [0, cols) of every cached head, at `rows` (head 0's) and head_stride
// elements apart for each next head, hold NaN or ±inf: read position by position, each
// position's heads in turn, the order they lie in memory.
template <class Rows>
bool BlockRowsNonFinite(const float* base, const Rows& rows, size_t cols, int64_t kv_heads,
                        int64_t head_stride, int64_t d) {
  bool found = false;
  for (size_t c = 0; c < cols; ++c)
    found |= any_non_finite(base + rows[c], kv_heads, d, head_stride);
  return found;
}

// Every cached head of batch entry b over positions [p0, p1), for float K and V whose heads lie
// inside each position's row: block by block, the block's K rows of all heads read in memory
// order (and checked), then each head's scores and softmax step, then V's rows the same way
// and each head's o += P·V. Each head's arithmetic is DecodeChunkOf's, in the same order.
void DecodeChunkAllHeads(const DecodeProblem& p, int64_t b, int64_t p0, int64_t p1, float* partials,
                         size_t partial_stride, float* scratch, bool* non_finite) {
  constexpr Dtype kFloat = Dtype::kFloat32;
  thread_local std::vector<HeadRows> own;
  own.resize(static_cast<size_t>(p.kv_heads));
  std::vector<ChunkState> heads;  // (a few dozen bytes a head; the task reads megabytes)
  const size_t scratch_floats = decode_scratch_floats(p);
  for (int64_t kv_h = 0; kv_h < p.kv_heads; ++kv_h) {
    const auto h = static_cast<size_t>(kv_h);
    heads.push_back(PrepareHead<kFloat>(p, b, kv_h, partials + h * partial_stride,
                                        scratch + h * scratch_floats, own[h]));
  }
  const RowLayout<kFloat> layout{p, b};
  const auto* k = static_cast<const float*>(p.k);
  const auto* v = static_cast<const float*>(p.v);
  const auto head_stride = static_cast<size_t>(p.kv_stride[1]);
  thread_local std::vector<size_t> offsets;
  bool found = false;
  for (int64_t j0 = p0; j0 < p1; j0 += static_cast<int64_t>(kDecodeKeyBlock)) {
    const size_t cols = static_cast<size_t>(std::min<int64_t>(kDecodeKeyBlock, p1 - j0));
    const auto block = [&](const auto& rows_of) {  // rows_of(kv_h): that head's rows
      found |= BlockRowsNonFinite(k, rows_of(0), cols, p.kv_heads, p.kv_stride[1], p.d);
      for (auto& t : heads) {
        ScoreBlock<kFloat>(t, k, rows_of(&t - heads.data()), j0, cols, kNoPrefetch);
      }
      found |= BlockRowsNonFinite(v, rows_of(0), cols, p.kv_heads, p.kv_stride[1], p.d);
      for (auto& t : heads)
        AccumulateBlock<kFloat>(t, v, rows_of(&t - heads.data()), cols, kNoPrefetch);
    };
    if (j0 + static_cast<int64_t>(cols) <= layout.run_end(j0)) {
      const size_t first = layout.at(j0, 0), pitch = static_cast<size_t>(layout.pitch);
      block([&](int64_t kv_h) {
        return ConsecutiveRows{first + static_cast<size_t>(kv_h) * head_stride, pitch};
      });
      continue;
    }
    offsets.resize(cols);
    for (size_t c = 0; c < cols; ++c) offsets[c] = layout.at(j0 + static_cast<int64_t>(c), 0);
    block([&](int64_t kv_h) {
      return TabledRows{offsets.data(), static_cast<size_t>(kv_h) * head_stride};
    });
  }
  if (non_finite != nullptr && found) *non_finite = true;
}

void DecodeChunk(const DecodeProblem& p, int64_t b, int64_t kv_h, int64_t p0, int64_t p1,
                 float* partial, float* scratch) {
  switch (p.storage) {
    case Dtype::kBFloat16:
      DecodeChunkOf<Dtype::kBFloat16>(p, b, kv_h, p0, p1, partial, scratch);
      break;
    case Dtype::kQ8:
      DecodeChunkOf<Dtype::kQ8>(p, b, kv_h, p0, p1, partial, scratch);
      break;
    case Dtype::kFloat32:
      DecodeChunkOf<Dtype::kFloat32>(p, b, kv_h, p0, p1, partial, scratch);
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(DecodeChunk);
HWY_EXPORT(DecodeChunkAllHeads);

size_t decode_row_floats(const DecodeProblem& p) {
  return static_cast<size_t>((p.d + 63) / 64 * 64);
}

size_t decode_partial_floats(const DecodeProblem& p) {
  const auto rows = static_cast<size_t>(p.heads / p.kv_heads * p.tq);
  return rows * (2 + decode_row_floats(p));
}

size_t decode_scratch_floats(const DecodeProblem& p) {
  const auto rows = static_cast<size_t>(p.heads / p.kv_heads * p.tq);
  return rows * (decode_row_floats(p) + static_cast<size_t>(kDecodeKeyBlock));
}

void decode_chunk(const DecodeProblem& p, int64_t b, int64_t kv_h, int64_t p0, int64_t p1,
                  float* partial, float* scratch) {
  HWY_DYNAMIC_DISPATCH(DecodeChunk)(p, b, kv_h, p0, p1, partial, scratch);
}

bool decode_heads_in_rows(const DecodeProblem& p) {
  return p.storage == Dtype::kFloat32 && p.kv_stride[2] != 0 && p.kv_heads > 1 &&
         p.kv_stride[1] < p.kv_stride[2];
}

void decode_chunk_all_heads(const DecodeProblem& p, int64_t b, int64_t p0, int64_t p1,
                            float* partials, size_t partial_stride, float* scratch,
                            bool* non_finite) {
  HWY_DYNAMIC_DISPATCH(DecodeChunkAllHeads)
  (p, b, p0, p1, partials, partial_stride, scratch, non_finite);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
