// The decode kernel's orchestration, shared by attend_cached (a KV cache) and sdpa (one or a few
// query rows against contiguous K and V): tasks of (batch, cached head, chunk of positions) over
// the threads, each a partial softmax state (m, l, o) per query row, then, per (batch, cached
// head), the partials merged in chunk order (the split-KV / flash-decoding scheme):
//   m = max_c m_c,  l = Σ_c e^(m_c − m)·l_c,  o = Σ_c e^(m_c − m)·o_c,  output = o / l.
#pragma once

#include <atomic>
#include <cstdint>

#include "attn/sdpa.hpp"
#include "src/kernels/decode.hpp"
#include "src/reference/checks.hpp"

namespace attn::detail {

// Fewer new query rows than this go to the decode kernel, as many or more to the fused forward
// (attend_cached's prompt, sdpa's other calls): one rule for both entries, why in
// attend_cached.cpp.
constexpr int64_t kDecodeRowLimit = 16;

// The decode problem of q (B, H, Tq, d rows contiguous) against Tk keys with these options:
// every field but K's and V's storage (k, v, storage, kv_stride, the page table), which the
// caller sets. And the first position its rows can see (a window's start, else 0).
kernels::DecodeProblem decode_problem_of(const AttentionDims& dims, const Tensor& q,
                                         const SdpaOptions& options);
int64_t first_visible_position(const kernels::DecodeProblem& p);

// Output (B, H, Tq, d) and logsumexp of the queries of `p` over cached positions [begin,
// p.position). With `non_finite_kv`, each task first scans its chunk of K and V (float only),
// just before the kernel reads the same rows, and sets the flag on NaN or ±inf; the caller
// names the element. A cache's contents were checked when appended: it passes nullptr.
SdpaResult run_decode(const kernels::DecodeProblem& p, int64_t begin,
                      std::atomic<bool>* non_finite_kv);

}  // namespace attn::detail
