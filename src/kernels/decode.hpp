// The decode kernel's contract: a few new queries against a long key/value cache, one chunk
// of cached positions at a time, producing a partial softmax state (m, l, o) per query row
// that the orchestration (src/attention/attend_cached.cpp) merges exactly.
//
// Legend: B batch, H query heads, Hkv cached heads, g = H / Hkv, Tq new queries, d head dim.
// The rows of one task are the g·Tq queries that share a cached head: row r = gi·Tq + i is
// query head kv_h·g + gi at new token i.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attn/dtype.hpp"

namespace attn::kernels {

// Cached positions per task: fixed (not derived from the thread count), so the merge order and
// hence the result do not depend on how many threads run.
constexpr int64_t kDecodeChunk = 512;
// Keys scored before each online-softmax step (a multiple of any vector width).
constexpr size_t kDecodeKeyBlock = 256;
// The kernel reads each key and value row in whole vectors of up to this many floats (AVX-512),
// so the storage must stay readable up to round_up(d, kDecodeMaxVectorFloats) floats past the
// start of its last row: the KV cache pads its storage; sdpa sends only d that are a multiple.
constexpr int64_t kDecodeMaxVectorFloats = 16;

struct DecodeProblem {
  const float* q;  // (B, H, Tq, d), element strides for b, h, t; rows contiguous
  int64_t q_stride[3];
  // Cache storage (B, Hkv, capacity, ·): rows of d floats, of d bfloat16 bits, or (q8) of d
  // int8 values followed by the row's scale as bfloat16 bits (kv_row_bytes).
  const void* k;
  const void* v;
  Dtype storage;
  // Float32 K and V laid out otherwise (sdpa on strided views, a packed batch's rows): the
  // element strides of b, kv_h and a position, the same for K and V, rows contiguous. All 0: the
  // cache's layout above.
  int64_t kv_stride[3];
  // With kv_stride, a paged cache (PyTorch's varlen_attn block_table, vLLM's layout): position
  // j's row is in page page_table[j / page_size], which starts page_table[·]·page_stride
  // elements into K and V; kv_stride[1] and [2] step within a page. nullptr: no pages.
  const int64_t* page_table;
  int64_t page_size, page_stride;
  int64_t batch, heads, kv_heads, tq, d, capacity;
  int64_t position;  // positions appended so far; query i sits at position − tq + i
  int64_t window;    // 0 = none; else keys p − window < j ≤ p
  float scale;
  // The variants of attn/sdpa.hpp: soft-capping's c (0 = off) and ALiBi's slope per query head
  // (H floats, or nullptr) apply to the scores here; the sinks are folded in when the partial
  // states are merged (src/attention/decode_run.cpp).
  float softcap;
  const float* alibi_slopes;
  const float* sinks;
};

// Bytes of one cached row of K or V in the storage: d values, and the bfloat16 scale of a q8 row.
constexpr int64_t kv_row_bytes(Dtype storage, int64_t d) {
  return storage == Dtype::kQ8 ? d + static_cast<int64_t>(sizeof(uint16_t))
                               : d * (storage == Dtype::kBFloat16 ? 2 : 4);
}

// Floats of per-worker scratch, and of one task's partial state (m, l, o per row).
size_t decode_scratch_floats(const DecodeProblem& p);
size_t decode_partial_floats(const DecodeProblem& p);
// The row length of o inside a partial state (d rounded up for any vector width).
size_t decode_row_floats(const DecodeProblem& p);

// Partial state of cached positions [p0, p1) for the rows of (b, kv_h): m and l (rows each)
// and o (rows × decode_row_floats), laid out m | l | o in `partial`.
void decode_chunk(const DecodeProblem& p, int64_t b, int64_t kv_h, int64_t p0, int64_t p1,
                  float* partial, float* scratch);

// Whether p's K and V are float rows laid out position by position with the cached heads inside
// each position's row (kv_stride[1] < kv_stride[2]: a packed batch's (T, Hkv, d) rows, a paged
// cache, a (B, T, Hkv, d) view), which decode_chunk_all_heads reads in memory order.
bool decode_heads_in_rows(const DecodeProblem& p);

// decode_chunk for every cached head of batch entry b at once, when decode_heads_in_rows(p):
// head kv_h's partial state at partials + kv_h·partial_stride, bitwise what decode_chunk gives
// it. A head's rows lie a row's pitch apart (4 KiB for 16 heads of 64 floats), so head by head
// each row is a new page for the prefetchers; here each block of positions is read row by row
// across the heads first (and checked for NaN and ±inf: *non_finite is set if any, when given)
// and the heads' products then find it in cache. Scratch: kv_heads · decode_scratch_floats(p).
void decode_chunk_all_heads(const DecodeProblem& p, int64_t b, int64_t p0, int64_t p1,
                            float* partials, size_t partial_stride, float* scratch,
                            bool* non_finite);

}  // namespace attn::kernels
