// The fused attention backward (FlashAttention-2, recomputing P from the saved logsumexp) for
// one task: one K/V head of one batch entry, with the query heads that share it. For each
// block of kQueryBlock queries i and each visible block of kKeyBlock keys j:
//   Sᵀ   = K_j·(s·Q_i)ᵀ (+ mask)      the forward's scores, bit for bit (same tiles, same order)
//   Pᵀ   = exp(Sᵀ − L_i)              L = logsumexp: already normalised, no running max
//   dPᵀ  = V_j·dO_iᵀ
//   dSᵀ  = s·Pᵀ ∘ (dPᵀ − D_i)         D_i = Σ_e dO_ie·O_ie, once per query block and chunk
//   dV_j += Pᵀ·dO_i,   dK_j += dSᵀ·Q_i,   dQ_i += dS·K_j
// Sᵀ and L are in base 2, as in the forward (s and the additive mask times log2 e, L too), so
// that P is a 2^x (Exp2Flushed); the steps after P are unchanged by it.
// Five products per block pair where the forward has two, all one register-tiled product
// (tile_product-inl.h) with different strides. In a pair that crosses the causal diagonal,
// each skips the tiles above it (DiagonalCut, as in the forward): at T = 64, one such pair
// per head, that made the backward 1.4–2× faster with the same gradients, bit for bit.
// Scores are kept transposed, keys × queries in the vector lanes, as in the forward: L_i and
// D_i are then one vector per lane group and the element-wise steps need no horizontal work;
// dS is read down its columns for dQ.
//
// bf16 products (FlashProblem::bf16_products): Q, K, V and dO arrive rounded to bfloat16; P and
// s·dS are rounded after every element-wise step has used them in float (RoundForProducts; on
// packed tiles by the packers that read them), so dV takes bf16(P), dK and dQ take bf16(s·dS). D is
// Σ dO·O of the rounded dO. Each gradient then moves by a few u = 2^-9 of its terms' size
// (measured: ≤ 5e-3 of the largest element). Where the CPU has AMX (p.amx_keys set, AVX-512
// targets), the five products run on its tiles from the same rounded values (the Amx* functions
// below; design.md has the layouts); where it has AVX-512 BF16 and no AMX, the same functions run
// them on vdpbf16ps (p.amx_tiles false).
//
// Memory: Q_i, dO_i (rows and transposed), the two score tiles, dQ_i, and dK/dV accumulators
// for one chunk of kKeyChunk = 512 keys live in a fixed scratch (about 0.45 MiB at d = 64),
// independent of T. Loop order: one task per K/V head (the per-head order of docs/design.md),
// which owns its dK, dV and dQ rows; inside it the key chunks in order, and for each chunk every
// query block that sees it, packed once per chunk (4 key blocks). The chunk's K, V, dK and dV
// stay in L2 while the query blocks pass; dQ_i is taken from and put back into its output rows
// between chunks (on the packed tiles, a whole block's dQᵀ stays there as it is, transposed
// once after the block's last chunk: QueryGradientInPlace), so it still sums its key blocks in key
// order. Query blocks outer over the whole of T (the order before) streamed K, V, dK and dV from L3
// once per query block: at T = 16384 with two threads, 2 × 16 MiB, more than a Zen 4's 32 MiB L3,
// and the backward fell from 84 % of the peak to 76 % (2.60× the forward; now 84 %, 2.37×). With
// fewer K/V heads than cores that leaves cores idle (MQA with B = 1 has one task), so there is
// also the two-pass order: one pass of (K/V head, chunk) tasks for dK and dV alone, and one of
// (head, query block) tasks for dQ, recomputing S, P and dP in each.
#include "src/kernels/flash_backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hwy/cache_control.h"
#include "src/kernels/amx_tiles.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/kernels/block_visibility.hpp"
#include "src/kernels/dpbf16_tiles.hpp"
#include "src/kernels/prefetch.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/flash_backward.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"
// Must come after tile_product-inl.h.
#include "src/kernels/amx_packing-inl.h"
#include "src/kernels/mask_block-inl.h"
#include "src/kernels/score_variants-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// Pᵀ = 2^(score_scale·Sᵀ − L) in place (both in base 2), the queries' L in the lanes:
// score_scale > 0 is what the scores are still to be multiplied by (1 when they are scaled
// already), in one fused multiply-subtract. Masked scores (−inf) and rows with no visible key
// (L = +inf) give 0.
void Probabilities(const DiagonalCut& cut, float* st, size_t ldq, const float* lse,
                   float score_scale) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF factor = hn::Set(df, score_scale);
  for (size_t r = 0; r < ldq; r += N) {
    const VF l = hn::LoadU(df, lse + r);
    const size_t cols = KeysForQueryVector(cut, r);
    for (size_t c = 0; c < cols; ++c) {
      float* s = st + c * ldq + r;
      const VF x = score_scale == 1.0f ? hn::Sub(hn::LoadU(df, s), l)
                                       : hn::MulSub(hn::LoadU(df, s), factor, l);
      hn::StoreU(Exp2Flushed(df, x), df, s);
    }
  }
}

// s·dSᵀ = Pᵀ ∘ (s·dPᵀ − s·D), in place of dPᵀ: the vector path packed dOᵀ times s, so its dPᵀ
// and D arrive scaled (one multiply per score less; dp_scale 1); the packed tiles' dPᵀ is
// multiplied by dp_scale = s here, as it is read (fused with the subtraction). Where P = 0 (masked)
// dS is set to 0: dPᵀ tiles above the diagonal are not computed, and what the scratch held there is
// not to be multiplied by 0 (inf·0).
void ScoreGradient(const DiagonalCut& cut, const float* pt, float* dpt, size_t ldq,
                   const float* scaled_delta, float dp_scale) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF zero = hn::Zero(df), factor = hn::Set(df, dp_scale);
  for (size_t r = 0; r < ldq; r += N) {
    const VF d = hn::LoadU(df, scaled_delta + r);
    const size_t cols = KeysForQueryVector(cut, r);
    for (size_t c = 0; c < cols; ++c) {
      const VF pr = hn::LoadU(df, pt + c * ldq + r);
      const VF dp = hn::LoadU(df, dpt + c * ldq + r);
      const VF ds = hn::Mul(pr, dp_scale == 1.0f ? hn::Sub(dp, d) : hn::MulSub(dp, factor, d));
      hn::StoreU(hn::IfThenZeroElse(hn::Eq(pr, zero), ds), df, dpt + c * ldq + r);
    }
  }
}

// Soft-capping's chain rule: s·dSᵀ of the raw scores = s·dSᵀ of the capped ones × (1 − tanh²),
// the slope Softcap stored.
void ChainSoftcap(const DiagonalCut& cut, const float* slope, float* dpt, size_t ldq) {
  const DF df;
  ForEachNeededVector(cut, ldq, [&](size_t at) {
    hn::StoreU(hn::Mul(hn::LoadU(df, dpt + at), hn::LoadU(df, slope + at)), df, dpt + at);
  });
}

// bf16 products: Pᵀ and s·dSᵀ rounded to bfloat16 in place, for the products that take them
// (dV from P; dK and dQ from dS), after every element-wise step has used them in float.
void RoundForProducts(const DiagonalCut& cut, float* pt, float* dpt, size_t ldq) {
  const DF df;
  ForEachNeededVector(cut, ldq, [&](size_t at) {
    hn::StoreU(RoundedToBfloat16(df, hn::LoadU(df, pt + at)), df, pt + at);
    hn::StoreU(RoundedToBfloat16(df, hn::LoadU(df, dpt + at)), df, dpt + at);
  });
}

// The pointers of one task's scratch.
struct Buffers {
  float *qt, *dot, *q_rows, *do_rows, *o_rows, *pt, *dpt, *k_rows, *tile, *dq, *dk_block, *dv_block,
      *lse, *delta, *softcap_slope;
  // The AMX path (amx set): Q's and dO's d-pairs (B of Sᵀ and dPᵀ), their query pairs (B of dK
  // and dV), P and dS as bf16 rows (A of dV and dK), dS's key pairs (B of dQᵀ), and dQᵀ. Its
  // products run on AMX tiles (amx_tiles) or on vdpbf16ps (dpbf16_tiles.hpp).
  bool amx, amx_tiles;
  uint32_t *q_pairs, *do_pairs, *q_row_pairs, *do_row_pairs, *ds_pairs;
  uint16_t *pt16, *dst16;
  float* dqt;
};

// The AMX tiles run where p has their operands and this target's vectors are their width.
bool UsesAmx(const FlashProblem& p) {
#if ATTN_AVX512_TARGET
  return p.amx_keys.data != nullptr;
#else
  (void)p;
  return false;
#endif
}

Buffers CarveScratch(const FlashProblem& p, float* scratch) {
  const BackwardScratchLayout at = backward_scratch_layout(p);
  auto words = [&](size_t offset) { return reinterpret_cast<uint32_t*>(scratch + offset); };
  auto halves = [&](size_t offset) { return reinterpret_cast<uint16_t*>(scratch + offset); };
  return {scratch + at.qt,
          scratch + at.dot,
          scratch + at.q_rows,
          scratch + at.do_rows,
          scratch + at.o_rows,
          scratch + at.pt,
          scratch + at.dpt,
          scratch + at.k_rows,
          scratch + at.tile,
          scratch + at.dq,
          scratch + at.dk_block,
          scratch + at.dv_block,
          scratch + at.lse,
          scratch + at.delta,
          scratch + at.softcap_slope,
          UsesAmx(p),
          UsesAmx(p) && p.amx_tiles,
          words(at.amx_q_pairs),
          words(at.amx_do_pairs),
          words(at.amx_q_row_pairs),
          words(at.amx_do_row_pairs),
          words(at.amx_ds_pairs),
          halves(at.amx_pt),
          halves(at.amx_dst),
          scratch + at.amx_dqt};
}

// x[i] = factor·bf16(x[i]) for i < n (a multiple of the vector length).
void ScaleRounded(float factor, size_t n, float* x) {
  const DF df;
  const VF f = hn::Set(df, factor);
  for (size_t i = 0; i < n; i += hn::Lanes(df))
    hn::StoreU(hn::Mul(f, RoundedToBfloat16(df, hn::LoadU(df, x + i))), df, x + i);
}

// Tiles for a query block: ldq queries (16 a tile) as products' columns; the reduction over
// queries (dK, dV) in whole chunks of 32.
inline size_t AmxQueryReach(size_t ldq) { return round_up(ldq, 32); }
inline size_t Rounded16(int64_t x) { return round_up(static_cast<size_t>(x), 16); }

// Packs query block i of head h: (s·log2 e·Q)ᵀ, dOᵀ, the Q and dO rows, L (in base 2) and D per
// query.
void LoadQueryBlock(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0, size_t rows,
                    const Buffers& s) {
  const FlashProblem& p = bp.forward;
  const size_t N = hn::Lanes(DF());
  const size_t d = static_cast<size_t>(p.d), dv = static_cast<size_t>(p.dv);
  const size_t ldq = round_up(rows, N), ldd = round_up(d, N), ldv = round_up(dv, N);
  const int64_t q_at = b * p.q_stride[0] + h * p.q_stride[1] + q0 * p.q_stride[2];
  const int64_t do_at = b * bp.d_out_stride[0] + h * bp.d_out_stride[1] + q0 * bp.d_out_stride[2];
  const int64_t o_at = b * p.out_stride[0] + h * p.out_stride[1] + q0 * p.out_stride[2];
  const float *q, *d_o, *o;
  int64_t q_stride = p.q_stride[2], do_stride = bp.d_out_stride[2], o_stride = p.out_stride[2];
  if (p.q_words != nullptr) {  // bfloat16 tensors (packed tiles only): the rows widened, exactly
    WidenRows(p.q_words + q_at, q_stride, rows, d, s.q_rows, ldd);
    WidenRows(bp.d_out_words + do_at, do_stride, rows, dv, s.do_rows, ldv);
    WidenRows(p.out_words + o_at, o_stride, rows, dv, s.o_rows, ldv);
    q = s.q_rows, d_o = s.do_rows, o = s.o_rows;
    q_stride = static_cast<int64_t>(ldd), do_stride = o_stride = static_cast<int64_t>(ldv);
  } else {
    q = p.q + q_at, d_o = bp.d_out + do_at, o = p.out + o_at;
  }
  if (s.amx) {  // s·dOᵀ for D, of dO rounded to bfloat16 (on AMX dO arrives as the caller's)
    PackTransposed(d_o, do_stride, rows, dv, 1.0f, s.dot, ldq);
    ScaleRounded(p.scale, dv * ldq, s.dot);
  } else {  // s·dOᵀ, for D too, and the vector products' operands (the AMX ones: below)
    PackTransposed(d_o, do_stride, rows, dv, p.scale, s.dot, ldq);
    PackTransposed(q, q_stride, rows, d, p.scale * kLog2e, s.qt, ldq);  // base 2
    PackRows(q, q_stride, rows, d, s.q_rows, ldd);
    PackRows(d_o, do_stride, rows, dv, s.do_rows, ldv);
  }
  const float* lse = p.logsumexp + (b * p.heads + h) * p.tq + q0;
  for (size_t r = 0; r < ldq; ++r) {
    // Padding lanes: L = +inf makes their P, and so every gradient they touch, 0.
    s.lse[r] = r < rows ? lse[r] * kLog2e : std::numeric_limits<float>::infinity();
  }
  // s·D = Σ_e (s·dO)∘O per query, with the queries in the lanes: Oᵀ goes through the tile buffer
  // (free until the first pair), and the sums need no horizontal additions (one chain of
  // scalar additions per query was half of this function at d = 32). Padding lanes: dOᵀ is 0.
  PackTransposed(o, o_stride, rows, dv, 1.0f, s.tile, ldq);
  for (size_t r = 0; r < ldq; r += N) {
    VF sum = hn::Zero(DF());
    for (size_t e = 0; e < dv; ++e) {
      sum = hn::MulAdd(hn::LoadU(DF(), s.dot + e * ldq + r), hn::LoadU(DF(), s.tile + e * ldq + r),
                       sum);
    }
    hn::StoreU(sum, DF(), s.delta + r);
  }
#if ATTN_AVX512_TARGET
  if (s.amx) {
    PackQueryPairs(q, q_stride, rows, d, static_cast<size_t>(p.amx_keys.row), ldq, s.q_pairs);
    PackQueryPairs(d_o, do_stride, rows, dv, static_cast<size_t>(p.amx_values.row), ldq,
                   s.do_pairs);
    const size_t pair_rows = AmxQueryReach(ldq) / 2;
    PackRowPairs(q, q_stride, rows, d, Rounded16(p.d), pair_rows, s.q_row_pairs);
    PackRowPairs(d_o, do_stride, rows, dv, Rounded16(p.dv), pair_rows, s.do_row_pairs);
    std::fill(s.dqt, s.dqt + Rounded16(p.d) * ldq, 0.0f);
    return;
  }
#endif
  std::fill(s.dq, s.dq + rows * ldd, 0.0f);
}

// Sizes of one (query block, key block) pair; ldq, ldd, ldv as the scratch rows use them.
struct PairShape {
  size_t rows, cols, d, dv, ldq, ldd, ldv;
};

PairShape ShapeOf(const FlashProblem& p, size_t rows, size_t cols) {
  const size_t N = hn::Lanes(DF());
  const size_t d = static_cast<size_t>(p.d), dv = static_cast<size_t>(p.dv);
  return {rows, cols, d, dv, round_up(rows, N), round_up(d, N), round_up(dv, N)};
}

const float* KeyRows(const FlashProblem& p, int64_t b, int64_t h, int64_t j0) {
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  return p.k + b * p.k_stride[0] + kv_h * p.k_stride[1] + j0 * p.k_stride[2];
}

const float* ValueRows(const FlashProblem& p, int64_t b, int64_t h, int64_t j0) {
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  return p.v + b * p.v_stride[0] + kv_h * p.v_stride[1] + j0 * p.v_stride[2];
}

// dS (the gradient of the scores after the cap: an additive mask's) into its rows for the
// mask's gradient: query r's row, keys 0 .. cols − 1 of the pair, from s·dSᵀ — square tiles of
// N keys × N queries transposed in registers, the edges one at a time (element by element the
// (H, T, T) gradient's writes cost +45 % on the backward at T = 4096). Keys past the ones a query
// vector sees are 0: left as the caller zeroed them, or written (write_zeros). Where the rows are
// aligned to a vector the tiles go out as non-temporal stores: nothing reads the gradient during
// the pass, and plain stores read every line first and filled the cache with it, evicting the K, V
// and Q rows the products re-read (see docs/performance.md). The task fences them (FlushStream).
void StoreScoreGradient(const DiagonalCut& cut, const PairShape& z, const float* dpt,
                        float inverse_scale, bool write_zeros, float* dscores, int64_t ld_dscores) {
  const size_t N = hn::Lanes(DF());
  const bool tiles = kHasTransposeTile && N * N <= 256;
  const bool aligned = reinterpret_cast<uintptr_t>(dscores) % (N * sizeof(float)) == 0 &&
                       static_cast<size_t>(ld_dscores) % N == 0;
  for (size_t r0 = 0; r0 < z.rows; r0 += N) {
    const size_t cols = KeysForQueryVector(cut, r0);
    const size_t whole_rows = std::min(N, z.rows - r0);
    const size_t tiled_cols = tiles && whole_rows == N ? cols / N * N : 0;
    for (size_t c0 = 0; c0 < tiled_cols; c0 += N) {
      float* tile = dscores + static_cast<int64_t>(r0) * ld_dscores + static_cast<int64_t>(c0);
      const auto from = static_cast<int64_t>(z.ldq);
      if (aligned) {
        TransposeTile<true>(dpt + c0 * z.ldq + r0, from, inverse_scale, tile,
                            static_cast<size_t>(ld_dscores));
      } else {
        TransposeTile(dpt + c0 * z.ldq + r0, from, inverse_scale, tile,
                      static_cast<size_t>(ld_dscores));
      }
    }
    for (size_t r = r0; r < r0 + whole_rows; ++r) {
      float* row = dscores + static_cast<int64_t>(r) * ld_dscores;
      for (size_t c = tiled_cols; c < cols; ++c) row[c] = dpt[c * z.ldq + r] * inverse_scale;
      if (write_zeros) std::fill(row + cols, row + z.cols, 0.0f);
    }
  }
}

// The AMX path's pieces of one pair (UsesAmx; the operands rounded to bfloat16 as the vector
// path rounds them, so only the order of float sums differs):
//   Sᵀ = K_j·Q_iᵀ · s·log2 e    dPᵀ = V_j·dO_iᵀ · s     (A: K, V rows packed per call)
//   dV_j += Pᵀ·dO_i    dK_j += s·dSᵀ·Q_i                (A: Pᵀ, dSᵀ as bf16 rows)
//   dQ_iᵀ += K_jᵀ·s·dSᵀ                                 (A: Kᵀ packed per call)
#if ATTN_AVX512_TARGET
// out = (rows of m from key j0) · (pairs)ᵀ · factor: Sᵀ (K, Q's pairs, s·log2 e, or 1 when
// Probabilities scales them) or dPᵀ (V, dO's pairs, 1: ScoreGradient scales them).
void AmxScoresOf(const Bf16Matrices& m, const FlashProblem& p, int64_t b, int64_t h, int64_t j0,
                 const PairShape& z, const DiagonalCut& cut, const uint32_t* pairs, float factor,
                 float* out) {
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  const auto row = static_cast<size_t>(m.row);
  packed_product(p.amx_tiles, false, m.of(b, p.kv_heads, kv_h) + j0 * m.row, row,
                 round_up(z.cols, kTile) / kTile, reinterpret_cast<const uint16_t*>(pairs), z.ldq,
                 z.ldq / kTile, row / kChunk, nullptr, out, z.ldq);
  if (factor != 1.0f) ScaleScores(cut, factor, out, z.ldq);
}

void AmxScores(const FlashProblem& p, int64_t b, int64_t h, int64_t j0, const PairShape& z,
               const DiagonalCut& cut, const Buffers& s, float factor) {
  AmxScoresOf(p.amx_keys, p, b, h, j0, z, cut, s.q_pairs, factor, s.pt);
}

// dPᵀ, unscaled (ScoreGradient multiplies it by s).
void AmxValueScores(const FlashProblem& p, int64_t b, int64_t h, int64_t j0, const PairShape& z,
                    const DiagonalCut& cut, const Buffers& s) {
  AmxScoresOf(p.amx_values, p, b, h, j0, z, cut, s.do_pairs, 1.0f, s.dpt);
}

// Pᵀ and s·dSᵀ (rounded) as bf16 rows, the A operands of dV and dK.
void AmxPackPair(const PairShape& z, const DiagonalCut& cut, const Buffers& s) {
  const size_t reach = AmxQueryReach(z.ldq);
  PackTransposedRows(cut, z.cols, s.pt, z.ldq, reach, s.pt16);
  PackTransposedRows(cut, z.cols, s.dpt, z.ldq, reach, s.dst16);
}

template <bool kValues>
void AmxKeyGradient(const PairShape& z, const Buffers& s, float* out) {
  const size_t reach = AmxQueryReach(z.ldq), width = kValues ? z.ldv : z.ldd;
  packed_product(s.amx_tiles, true, kValues ? s.pt16 : s.dst16, reach,
                 round_up(z.cols, kTile) / kTile,
                 reinterpret_cast<const uint16_t*>(kValues ? s.do_row_pairs : s.q_row_pairs), width,
                 width / kTile, reach / kChunk, nullptr, out, width);
}

void AmxQueryGradient(const FlashProblem& p, int64_t b, int64_t h, int64_t j0, const PairShape& z,
                      const DiagonalCut& cut, const Buffers& s, float* dqt) {
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  size_t chunks[kQueryBlockPadded / kTile];
  PackKeyPairs(cut, z.cols, s.dpt, z.ldq, s.ds_pairs, chunks);
  packed_product(p.amx_tiles, true, p.amx_keys_t.of(b, p.kv_heads, kv_h) + j0,
                 static_cast<size_t>(p.amx_keys_t.row), Rounded16(p.d) / kTile,
                 reinterpret_cast<const uint16_t*>(s.ds_pairs), z.ldq, z.ldq / kTile, 0, chunks,
                 dqt, z.ldq);
}
#else  // never called: UsesAmx is false on these targets
void AmxScores(const FlashProblem&, int64_t, int64_t, int64_t, const PairShape&, const DiagonalCut&,
               const Buffers&, float) {}
void AmxValueScores(const FlashProblem&, int64_t, int64_t, int64_t, const PairShape&,
                    const DiagonalCut&, const Buffers&) {}
void AmxPackPair(const PairShape&, const DiagonalCut&, const Buffers&) {}
template <bool kValues>
void AmxKeyGradient(const PairShape&, const Buffers&, float*) {}
void AmxQueryGradient(const FlashProblem&, int64_t, int64_t, int64_t, const PairShape&,
                      const DiagonalCut&, const Buffers&, float*) {}
#endif

// The element-wise heart of one pair, for the query block loaded in s and keys [j0, j0 + cols):
// leaves Pᵀ in s.pt and s·dSᵀ in s.dpt, for the keys each vector of queries needs (cut).
// Tiles of keys skip the query vectors none of which sees them (MaskBlock sets those scores
// to -inf, so their P is 0).
// key_gradients: dK and dV follow (the packed tiles then get Pᵀ and dSᵀ as bf16 rows); the
// dQ pass of the two-pass order needs only dSᵀ, which its own packer reads.
void PairScores(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t j0,
                const PairShape& z, const DiagonalCut& cut, const Buffers& s, bool key_gradients,
                float* dscores, int64_t ld_dscores, bool dscores_zeroed) {
  const size_t N = hn::Lanes(DF());
  const auto ldk = static_cast<size_t>(p.k_stride[2]), ldv_in = static_cast<size_t>(p.v_stride[2]);
  // The packed tiles' scores come out unscaled; where scores_scaled_as_read, Probabilities
  // scales them as it reads them: one pass over the block less, as in the forward.
  const float scale2 = p.scale * kLog2e;
  const bool scale_in_probabilities = s.amx && scores_scaled_as_read(p);
  if (s.amx) {
    AmxScores(p, b, h, j0, z, cut, s, scale_in_probabilities ? 1.0f : scale2);  // Sᵀ
  } else {
    TileProductFromVector<false>(cut, z.cols, z.ldq / N, KeyRows(p, b, h, j0), ldk, 1, z.d, s.qt,
                                 z.ldq, s.pt, z.ldq);  // Sᵀ
  }
  ScoreVariants(p, h, q0, j0, cut, s.pt, z.ldq, s.softcap_slope);  // softcap, ALiBi
  MaskBlock(p, b, h, q0, z.rows, j0, z.cols, kLog2e, s.pt, z.ldq);
  Probabilities(cut, s.pt, z.ldq, s.lse, scale_in_probabilities ? scale2 : 1.0f);  // Pᵀ
  if (s.amx) {
    AmxValueScores(p, b, h, j0, z, cut, s);  // dPᵀ
  } else {
    TileProductFromVector<false>(cut, z.cols, z.ldq / N, ValueRows(p, b, h, j0), ldv_in, 1, z.dv,
                                 s.dot, z.ldq, s.dpt, z.ldq);  // dPᵀ
  }
  ScoreGradient(cut, s.pt, s.dpt, z.ldq, s.delta, s.amx ? p.scale : 1.0f);  // s·dSᵀ
  if (dscores != nullptr) {
    StoreScoreGradient(cut, z, s.dpt, 1.0f / p.scale, !dscores_zeroed, dscores, ld_dscores);
  }
  if (p.softcap > 0.0f) ChainSoftcap(cut, s.softcap_slope, s.dpt, z.ldq);
  // The vector kernels read P and dS rounded in place; the packed tiles' packers round them as
  // they read them (one pass over both blocks less).
  if (s.amx) {
    if (key_gradients) AmxPackPair(z, cut, s);
  } else if (p.bf16_products) {
    RoundForProducts(cut, s.pt, s.dpt, z.ldq);
  }
}

// out (+)= Aᵀ·X for the pair's keys: dV_j from (Pᵀ, dO_i), dK_j from (s·dSᵀ, Q_i), out and X
// rows ld floats apart. A tile of keys runs over the queries from the first that sees any of
// them (P and dS are 0 before).
template <bool kAccumulate>
void KeyGradient(const DiagonalCut& cut, const PairShape& z, const float* at, const float* x,
                 size_t ld, float* out) {
  TileProductFromTerm<kAccumulate>(cut, z.cols, ld / hn::Lanes(DF()), at, z.ldq, 1, z.rows, x, ld,
                                   out, ld);
}

// dQ_i += dS·K_j, dS read from dSᵀ down its columns, a tile of query rows over the keys its
// last row sees. K's rows are read as whole vectors, so they are packed when d is not a whole
// number of vectors.
void AccumulateQueryGradient(const FlashProblem& p, int64_t b, int64_t h, int64_t j0,
                             const PairShape& z, const DiagonalCut& cut, const Buffers& s,
                             float* dqt) {
  if (s.amx) {
    AmxQueryGradient(p, b, h, j0, z, cut, s, dqt);
    return;
  }
  const size_t N = hn::Lanes(DF());
  const float* k_block = KeyRows(p, b, h, j0);
  auto ld_k_block = static_cast<size_t>(p.k_stride[2]);
  if (z.d % N != 0) {
    PackRows(k_block, p.k_stride[2], z.cols, z.d, s.k_rows, z.ldd);
    k_block = s.k_rows;
    ld_k_block = z.ldd;
  }
  TileProductToTerm<true>(cut, z.rows, z.ldd / N, s.dpt, 1, z.ldq, k_block, ld_k_block, s.dq,
                          z.ldd);
}

// dS of query q0 and key j0 of head h, for the mask's gradient; nullptr when not asked for.
float* ScoreGradientRows(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                         int64_t j0) {
  if (bp.dscores == nullptr) return nullptr;
  return bp.dscores + b * bp.dscores_stride[0] + h * bp.dscores_stride[1] +
         q0 * bp.dscores_stride[2] + j0;
}

// floats [0, n) of row as 0: streaming stores from the first vector boundary, since a kept
// gradient buffer's unseen part is large (the upper half of a causal (H, T, T) one) and nothing
// reads it during the pass.
void ZeroRow(float* row, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t e = 0;
  for (; e < n && reinterpret_cast<uintptr_t>(row + e) % (N * sizeof(float)) != 0; ++e)
    row[e] = 0.0f;
  for (; e + N <= n; e += N) hn::Stream(hn::Zero(df), df, row + e);
  for (; e < n; ++e) row[e] = 0.0f;
}

// In a buffer the caller keeps (bp.dscores_zeroed false): the mask gradient's elements of
// query rows [q0, q0 + rows) of head h in key blocks that no query of the block sees, outside
// `seen` (the block's visible_keys; the pairs write the rest): before the first such block and
// from past the last one to Tk.
void ZeroUnseenScoreGradient(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                             int64_t rows, KeyRange seen) {
  if (bp.dscores == nullptr || bp.dscores_zeroed) return;
  const FlashProblem& p = bp.forward;
  if (seen.begin >= seen.end) seen = {p.tk, p.tk};  // no key seen: the whole row
  for (int64_t r = 0; r < rows; ++r) {
    float* row = ScoreGradientRows(bp, b, h, q0 + r, 0);
    ZeroRow(row, static_cast<size_t>(seen.begin));
    ZeroRow(row + seen.end, static_cast<size_t>(p.tk - seen.end));
  }
}

// Query q0's row of dQ for head h; the rows after it are bp.dq_stride[2] apart.
float* QueryGradientRows(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0) {
  return bp.dq + b * bp.dq_stride[0] + h * bp.dq_stride[1] + q0 * bp.dq_stride[2];
}

void StoreQueryGradient(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                        const PairShape& z, const Buffers& s) {
  float* dq = QueryGradientRows(bp, b, h, q0);
  if (s.amx) {  // dQᵀ: a transpose on the way out, tiles in registers
    Transpose(s.dqt, static_cast<int64_t>(z.ldq), z.d, z.rows, 1.0f, dq,
              static_cast<size_t>(bp.dq_stride[2]));
    return;
  }
  for (size_t r = 0; r < z.rows; ++r) {
    std::copy(s.dq + r * z.ldd, s.dq + r * z.ldd + z.d,
              dq + static_cast<int64_t>(r) * bp.dq_stride[2]);
  }
}

// All key blocks for query block [q0, q0 + rows) of head h: writes the block's dQ rows (the
// two-pass order's second pass).
void QueryBlock(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0, size_t rows,
                const Buffers& s) {
  const FlashProblem& p = bp.forward;
  LoadQueryBlock(bp, b, h, q0, rows, s);
  const KeyRange keys_seen = visible_keys(p, b, q0, static_cast<int64_t>(rows));
  ZeroUnseenScoreGradient(bp, b, h, q0, static_cast<int64_t>(rows), keys_seen);
  for (int64_t j0 = keys_seen.begin; j0 < keys_seen.end; j0 += kKeyBlock) {
    const PairShape z =
        ShapeOf(p, rows, static_cast<size_t>(std::min(kKeyBlock, keys_seen.end - j0)));
    const DiagonalCut cut = diagonal_cut(p, q0, rows, j0, z.cols);
    PairScores(p, b, h, q0, j0, z, cut, s, false, ScoreGradientRows(bp, b, h, q0, j0),
               bp.dscores_stride[2], bp.dscores_zeroed);
    AccumulateQueryGradient(p, b, h, j0, z, cut, s, s.dqt);
  }
  StoreQueryGradient(bp, b, h, q0, ShapeOf(p, rows, 0), s);
}

// Whether the one-pass order keeps query block [q0, q0 + rows)'s dQᵀ (the packed tiles' d × ldq
// floats) in that block's own dQ rows between key chunks, where it takes exactly their room: a
// whole block, d a number of tiles, rows contiguous. The block is then transposed into rows
// once, after its last chunk, while hot (TransposeQueryGradientInPlace), instead of out of and back
// into them at every chunk (ResumeQueryGradient, StoreQueryGradient): those transposes were 2–3 %
// of a bf16 backward's samples at T = 8192, 16 chunks.
bool QueryGradientInPlace(const FlashBackwardProblem& bp, const Buffers& s, int64_t rows) {
  const int64_t d = bp.forward.d;
  return s.amx && rows == kQueryBlock && kQueryBlock == kQueryBlockPadded && d % 16 == 0 &&
         bp.dq_stride[2] == d;
}

// Query block q0's dQᵀ, in its rows, into those rows as dQ: through the scratch's dQᵀ, which
// StoreQueryGradient writes out.
void TransposeQueryGradientInPlace(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                                   const PairShape& z, const Buffers& s) {
  const float* dqt = QueryGradientRows(bp, b, h, q0);
  std::copy(dqt, dqt + bp.forward.d * kQueryBlock, s.dqt);
  StoreQueryGradient(bp, b, h, q0, z, s);
}

// dQ rows [q0, q0 + rows) of head h as far as the key chunks before this one took them, back
// into the query block's accumulator: the one-pass order keeps them in the output rows
// between chunks, so each dQ element still sums its key blocks in key order.
void ResumeQueryGradient(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                         const PairShape& z, const Buffers& s) {
  const float* dq = QueryGradientRows(bp, b, h, q0);
  if (s.amx) {  // into dQᵀ (element by element, this and its way out were 2.4 % of a bf16
                // backward's samples at T = 4096)
    Transpose(dq, bp.dq_stride[2], z.rows, z.d, 1.0f, s.dqt, z.ldq);
    return;
  }
  for (size_t r = 0; r < z.rows; ++r) {
    const float* row = dq + static_cast<int64_t>(r) * bp.dq_stride[2];
    std::copy(row, row + z.d, s.dq + r * z.ldd);
  }
}

// A key chunk's rows of dK or dV (`rows` rows of `width` values, ld apart in the scratch) into
// the gradient's output from element `at` on, `stride` apart: copied as floats, or rounded into
// bfloat16 words where the problem asks for them (whose rows are contiguous: stride = width).
void StoreGradientRows(const float* block, size_t ld, size_t rows, size_t width, int64_t stride,
                       float* floats, uint16_t* words, int64_t at) {
  if (words != nullptr) {
    round_to_bfloat16_portable(block, static_cast<int64_t>(rows), static_cast<int64_t>(width),
                               static_cast<int64_t>(ld), words + at);
    return;
  }
  for (size_t c = 0; c < rows; ++c) {
    std::copy(block + c * ld, block + c * ld + width,
              floats + at + static_cast<int64_t>(c) * stride);
  }
}

// The dK and dV rows of keys [j_begin, j_begin + kKeyChunk) of one K/V head, from every query
// block of its query heads that sees them, accumulated in scratch; with query_gradients, the
// same pairs also add to those query blocks' dQ rows (taken from and put back into the output
// rows). A chunk of several key blocks, so that each query block is packed once per chunk.
// Per head in chunk order (query_gradients), this is the one-pass order: a chunk's K, V, dK
// and dV rows (4 × 128 KiB at d = 64) stay in L2 while every query block that sees them
// passes — query blocks outer over the whole of T streamed them from L3 once per query block,
// and with two threads at T = 16384 (2 × 16 MiB) that fell out of a 32 MiB L3.
void KeyChunk(const FlashBackwardProblem& bp, int64_t b, int64_t kv_h, int64_t j_begin,
              bool query_gradients, const Buffers& s) {
  const FlashProblem& p = bp.forward;
  const int64_t j_end = std::min(j_begin + kKeyChunk, p.tk);
  const PairShape chunk = ShapeOf(p, 0, static_cast<size_t>(j_end - j_begin));
  std::fill(s.dk_block, s.dk_block + chunk.cols * chunk.ldd, 0.0f);
  std::fill(s.dv_block, s.dv_block + chunk.cols * chunk.ldv, 0.0f);
  const int64_t group = p.heads / p.kv_heads;
  for (int64_t h = kv_h * group; h < (kv_h + 1) * group; ++h) {
    for (int64_t q0 = 0; q0 < p.tq; q0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, p.tq - q0);
      const KeyRange keys_seen = visible_keys(p, b, q0, rows);
      const int64_t first = std::max(j_begin, keys_seen.begin),
                    last = std::min(j_end, keys_seen.end);
      if (first >= last) continue;  // no query of this block sees the chunk
      LoadQueryBlock(bp, b, h, q0, static_cast<size_t>(rows), s);
      if (q0 + kQueryBlock < p.tq) {  // the next block's rows, while this one's pairs run
        prefetch_query_block(bp, b, h, q0 + kQueryBlock,
                             std::min(kQueryBlock, p.tq - q0 - kQueryBlock));
      }
      const PairShape block = ShapeOf(p, static_cast<size_t>(rows), 0);
      // dQᵀ kept in its own rows between chunks where it fits them, else in scratch.
      const bool first_chunk = keys_seen.begin >= j_begin, last_chunk = keys_seen.end <= j_end;
      const bool in_place = query_gradients && QueryGradientInPlace(bp, s, rows);
      float* dqt = in_place ? QueryGradientRows(bp, b, h, q0) : s.dqt;
      if (in_place && first_chunk) std::fill(dqt, dqt + p.d * kQueryBlock, 0.0f);
      if (query_gradients && !in_place && !first_chunk) ResumeQueryGradient(bp, b, h, q0, block, s);
      for (int64_t j0 = first; j0 < last; j0 += kKeyBlock) {
        const PairShape z = ShapeOf(p, static_cast<size_t>(rows),
                                    static_cast<size_t>(std::min(kKeyBlock, last - j0)));
        const DiagonalCut cut = diagonal_cut(p, q0, z.rows, j0, z.cols);
        // The mask's gradient is written once: here in the one-pass order, by the dQ pass in
        // the two-pass order.
        PairScores(p, b, h, q0, j0, z, cut, s, true,
                   query_gradients ? ScoreGradientRows(bp, b, h, q0, j0) : nullptr,
                   bp.dscores_stride[2], bp.dscores_zeroed);
        const auto at = static_cast<size_t>(j0 - j_begin);
        if (s.amx) {
          AmxKeyGradient<true>(z, s, s.dv_block + at * z.ldv);   // dV_j
          AmxKeyGradient<false>(z, s, s.dk_block + at * z.ldd);  // dK_j
        } else {
          KeyGradient<true>(cut, z, s.pt, s.do_rows, z.ldv, s.dv_block + at * z.ldv);  // dV_j
          KeyGradient<true>(cut, z, s.dpt, s.q_rows, z.ldd, s.dk_block + at * z.ldd);  // dK_j
        }
        if (query_gradients) AccumulateQueryGradient(p, b, h, j0, z, cut, s, dqt);
      }
      if (in_place && last_chunk) TransposeQueryGradientInPlace(bp, b, h, q0, block, s);
      if (query_gradients && !in_place) StoreQueryGradient(bp, b, h, q0, block, s);
    }
  }
  const int64_t dk_at = b * bp.dk_stride[0] + kv_h * bp.dk_stride[1] + j_begin * bp.dk_stride[2];
  const int64_t dv_at = b * bp.dv_stride[0] + kv_h * bp.dv_stride[1] + j_begin * bp.dv_stride[2];
  StoreGradientRows(s.dk_block, chunk.ldd, chunk.cols, chunk.d, bp.dk_stride[2], bp.dk, bp.dk_words,
                    dk_at);
  StoreGradientRows(s.dv_block, chunk.ldv, chunk.cols, chunk.dv, bp.dv_stride[2], bp.dv,
                    bp.dv_words, dv_at);
}

// dQ's rows [q0, q0 + rows) of head h, complete, rounded from dq into dq_words when the problem
// asks for bfloat16 gradients.
void RoundQueryGradient(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                        int64_t rows) {
  if (bp.dq_words == nullptr) return;
  const int64_t at = b * bp.dq_stride[0] + h * bp.dq_stride[1] + q0 * bp.dq_stride[2];
  round_to_bfloat16_portable(bp.dq + at, rows, bp.forward.d, bp.dq_stride[2], bp.dq_words + at);
}

// The per-head order: one task per K/V head, its key chunks in order, one pass each. A query
// block that sees no key (a padded batch entry, queries before the first key) meets no chunk,
// so its dQ rows are zeroed here: every element of the gradient views is written.
void FlashBackwardHead(const FlashBackwardProblem& bp, int64_t b, int64_t kv_h, float* scratch) {
  const FlashProblem& p = bp.forward;
  const int64_t group = p.heads / p.kv_heads;
  for (int64_t h = kv_h * group; h < (kv_h + 1) * group; ++h) {
    for (int64_t q0 = 0; q0 < p.tq; q0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, p.tq - q0);
      const KeyRange keys_seen = visible_keys(p, b, q0, rows);
      ZeroUnseenScoreGradient(bp, b, h, q0, rows, keys_seen);
      if (keys_seen.begin < keys_seen.end) continue;
      float* dq = QueryGradientRows(bp, b, h, q0);
      for (int64_t r = 0; r < rows; ++r)
        std::fill(dq + r * bp.dq_stride[2], dq + r * bp.dq_stride[2] + p.d, 0.0f);
    }
  }
  const Buffers buffers = CarveScratch(p, scratch);
  if (buffers.amx_tiles) amx_begin();
  for (int64_t j_begin = 0; j_begin < p.tk; j_begin += kKeyChunk)
    KeyChunk(bp, b, kv_h, j_begin, true, buffers);
  if (buffers.amx_tiles) amx_end();
  for (int64_t h = kv_h * group; h < (kv_h + 1) * group; ++h) RoundQueryGradient(bp, b, h, 0, p.tq);
  if (bp.dscores != nullptr) hwy::FlushStream();  // the streamed dS stores, seen by all
}

// Loop order (c), first pass: a chunk's dK and dV rows alone.
void FlashBackwardKeyChunk(const FlashBackwardProblem& bp, int64_t b, int64_t kv_h, int64_t j_begin,
                           float* scratch) {
  const Buffers buffers = CarveScratch(bp.forward, scratch);
  if (buffers.amx_tiles) amx_begin();
  KeyChunk(bp, b, kv_h, j_begin, false, buffers);
  if (buffers.amx_tiles) amx_end();
}

// Loop order (c), second pass: the dQ rows of query block [q0, q0 + kQueryBlock) of head h.
void FlashBackwardQueryBlock(const FlashBackwardProblem& bp, int64_t b, int64_t h, int64_t q0,
                             float* scratch) {
  const FlashProblem& p = bp.forward;
  const Buffers buffers = CarveScratch(p, scratch);
  if (buffers.amx_tiles) amx_begin();
  QueryBlock(bp, b, h, q0, static_cast<size_t>(std::min(kQueryBlock, p.tq - q0)), buffers);
  if (buffers.amx_tiles) amx_end();
  RoundQueryGradient(bp, b, h, q0, std::min(kQueryBlock, p.tq - q0));
  if (bp.dscores != nullptr) hwy::FlushStream();  // the streamed dS stores, seen by all
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn::kernels {

HWY_EXPORT(FlashBackwardHead);
HWY_EXPORT(FlashBackwardKeyChunk);
HWY_EXPORT(FlashBackwardQueryBlock);

BackwardScratchLayout backward_scratch_layout(const FlashProblem& p) {
  // Sized for the widest vectors any target may use (64 lanes), so every target fits; each
  // piece starts 64-byte aligned.
  auto up = [](int64_t x, int64_t m) { return static_cast<size_t>((x + m - 1) / m * m); };
  const auto ldd = static_cast<int64_t>(up(p.d, 64)), ldv = static_cast<int64_t>(up(p.dv, 64));
  BackwardScratchLayout at{};
  size_t next = 0;
  auto take = [&](size_t& offset, int64_t floats) {
    offset = next;
    next += up(floats, 16);
  };
  take(at.qt, p.d * kQueryBlockPadded);
  take(at.dot, p.dv * kQueryBlockPadded);
  take(at.q_rows, kQueryBlock * ldd);
  take(at.do_rows, kQueryBlock * ldv);
  take(at.o_rows, p.out_words != nullptr ? kQueryBlock * ldv : 0);  // bfloat16 O widened
  take(at.pt, kKeyBlock * kQueryBlockPadded);
  take(at.dpt, kKeyBlock * kQueryBlockPadded);
  take(at.k_rows, kKeyBlock * ldd);
  take(at.tile, kKeyBlock * std::max(ldd, ldv));
  take(at.dq, kQueryBlock * ldd);
  take(at.dk_block, kKeyChunk * ldd);
  take(at.dv_block, kKeyChunk * ldv);
  take(at.lse, kQueryBlockPadded);
  take(at.delta, kQueryBlockPadded);
  take(at.softcap_slope, p.softcap > 0.0f ? kKeyBlock * kQueryBlockPadded : 0);
  // AMX (words and halves counted in floats): d and dv padded to 32 in pairs × the queries;
  // queries in pairs × d, dv padded to 16; keys × queries in bf16; key pairs × queries; dQᵀ.
  const bool amx = p.amx_keys.data != nullptr;
  const int64_t d32 = up(p.d, 32), dv32 = up(p.dv, 32), d16 = up(p.d, 16), dv16 = up(p.dv, 16);
  take(at.amx_q_pairs, amx ? d32 / 2 * kQueryBlockPadded : 0);
  take(at.amx_do_pairs, amx ? dv32 / 2 * kQueryBlockPadded : 0);
  take(at.amx_q_row_pairs, amx ? kQueryBlockPadded / 2 * d16 : 0);
  take(at.amx_do_row_pairs, amx ? kQueryBlockPadded / 2 * dv16 : 0);
  take(at.amx_pt, amx ? kKeyBlock * kQueryBlockPadded / 2 : 0);
  take(at.amx_dst, amx ? kKeyBlock * kQueryBlockPadded / 2 : 0);
  take(at.amx_ds_pairs, amx ? kKeyBlock / 2 * kQueryBlockPadded : 0);
  take(at.amx_dqt, amx ? d16 * kQueryBlockPadded : 0);
  at.total = next;
  return at;
}

size_t flash_backward_scratch_floats(const FlashProblem& p) {
  return backward_scratch_layout(p).total;
}

void flash_backward_head(const FlashBackwardProblem& p, int64_t b, int64_t kv_h, float* scratch) {
  HWY_DYNAMIC_DISPATCH(FlashBackwardHead)(p, b, kv_h, scratch);
}

void flash_backward_key_chunk(const FlashBackwardProblem& p, int64_t b, int64_t kv_h,
                              int64_t j_begin, float* scratch) {
  HWY_DYNAMIC_DISPATCH(FlashBackwardKeyChunk)(p, b, kv_h, j_begin, scratch);
}

void flash_backward_query_block(const FlashBackwardProblem& p, int64_t b, int64_t h, int64_t q0,
                                float* scratch) {
  HWY_DYNAMIC_DISPATCH(FlashBackwardQueryBlock)(p, b, h, q0, scratch);
}

}  // namespace attn::kernels
#endif  // HWY_ONCE
