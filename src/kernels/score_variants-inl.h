// The score variants of attn/sdpa.hpp in the fused kernels — soft-capping, ALiBi and the
// attention sink — compiled once per Highway target (include it after tile_product-inl.h). The
// forward and the backward both run them on a block of transposed scores Sᵀ (one key per row,
// the queries in the vector lanes), in base 2 (the scores already carry the factor log2 e, see
// flash_forward.cpp), over the keys each vector of queries sees (KeysForQueryVector), so they
// cost nothing above the causal diagonal. Each is a pass over the tile the softmax reads next:
// still in L1.
#if defined(ATTN_KERNELS_SCORE_VARIANTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTN_KERNELS_SCORE_VARIANTS_INL_H_
#undef ATTN_KERNELS_SCORE_VARIANTS_INL_H_
#else
#define ATTN_KERNELS_SCORE_VARIANTS_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "src/kernels/block_visibility.hpp"
#include "src/kernels/simd_common-inl.h"
#include "src/kernels/tile_product-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn::kernels {
namespace HWY_NAMESPACE {

// Soft-capping, s → c·tanh(s / c) in base e. In base 2 (x = s·log2 e) that is the same map
// with the cap c·log2 e, so `cap2` = c·log2 e, and tanh(s / c) = tanh(x / cap2). With `slope`
// (the backward), also stores d(capped)/d(raw) = 1 − tanh² there, at the same offsets.
inline void Softcap(const DiagonalCut& cut, float* st, size_t ldq, float cap2, float* slope) {
  const DF df;
  const VF cap = hn::Set(df, cap2), inverse = hn::Set(df, 1.0f / cap2);
  const VF one = hn::Set(df, 1.0f);
  ForEachNeededVector(cut, ldq, [&](size_t at) {
    const VF t = TanhRational(df, hn::Mul(hn::LoadU(df, st + at), inverse));
    hn::StoreU(hn::Mul(cap, t), df, st + at);
    if (slope != nullptr) hn::StoreU(hn::NegMulAdd(t, t, one), df, slope + at);
  });
}

// ALiBi: adds −slope·|pos_r − j| to the score of query lane r (position first_position + r)
// and key j = j0 + c; `slope2` = slope·log2 e. The distances come from the indices (exact in
// float up to 2^24 positions): no bias tensor is read.
inline void AddAlibi(const DiagonalCut& cut, float* st, size_t ldq, int64_t first_position,
                     int64_t j0, float slope2) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF minus_slope = hn::Set(df, -slope2), lanes = hn::Iota(df, 0.0f);
  for (size_t r = 0; r < ldq; r += N) {
    const size_t cols = KeysForQueryVector(cut, r);
    // pos − j for the first key: first_position + r + lane − j0, falling by 1 per key.
    const VF start = hn::Add(
        lanes, hn::Set(df, static_cast<float>(first_position + static_cast<int64_t>(r) - j0)));
    for (size_t c = 0; c < cols; ++c) {
      float* s = st + c * ldq + r;
      const VF distance = hn::Abs(hn::Sub(start, hn::Set(df, static_cast<float>(c))));
      hn::StoreU(hn::MulAdd(minus_slope, distance, hn::LoadU(df, s)), df, s);
    }
  }
}

// The sink joins the softmax's sum once every key block is folded in: with the rows' running
// max m and sum l (base 2) and `sink2` = sink·log2 e, m' = max(m, sink2),
// l' = l·2^(m − m') + 2^(sink2 − m'), and alpha = 2^(m − m') the factor o's rows take. A row
// that saw no key (m = -inf) gets m' = sink2, l' = 1, alpha = 0: output 0, logsumexp = sink.
inline void FoldSink(float sink2, size_t ldq, float* m, float* l, float* alpha) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF sink = hn::Set(df, sink2);
  for (size_t r = 0; r < ldq; r += N) {
    const VF m_old = hn::LoadU(df, m + r);
    const VF m_new = hn::Max(m_old, sink);
    const VF a = Exp2Flushed(df, hn::Sub(m_old, m_new));  // 2^-inf: flushed to 0
    hn::StoreU(hn::MulAdd(hn::LoadU(df, l + r), a, Exp2Flushed(df, hn::Sub(sink, m_new))), df,
               l + r);
    hn::StoreU(m_new, df, m + r);
    hn::StoreU(a, df, alpha + r);
  }
}

// The variants that change a block's scores, after Sᵀ = K·(scale·Q)ᵀ and before the mask: the
// cap first (it bounds the product alone), then ALiBi's bias.
inline void ScoreVariants(const FlashProblem& p, int64_t h, int64_t q0, int64_t j0,
                          const DiagonalCut& cut, float* st, size_t ldq, float* softcap_slope) {
  if (p.softcap > 0.0f) Softcap(cut, st, ldq, p.softcap * kLog2e, softcap_slope);
  if (p.alibi_slopes != nullptr) {
    AddAlibi(cut, st, ldq, p.query_position0 + q0, j0, p.alibi_slopes[h] * kLog2e);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attn::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
