// Attention of a few new queries against a KV cache: the decode kernel's tasks split the cached
// positions so that even one query uses every core (src/attention/decode_run.hpp); a prompt of
// many queries runs the fused forward on views of the cache.
#include <algorithm>
#include <cmath>

#include "attn/error.hpp"
#include "attn/kv_cache.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"
#include "src/attention/decode_run.hpp"
#include "src/core/phase_scope.hpp"
#include "src/kernels/decode.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/finite.hpp"

namespace attn {
namespace {

// The window that applies: the cache's, the caller's, or the narrower of the two.
int64_t effective_window(const KVCache& cache, const SdpaOptions& options) {
  const int64_t a = cache.config().window, b = options.window;
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

void check_cached_attention(const Tensor& q, const KVCache& cache, const SdpaOptions& options,
                            int64_t window) {
  const KVCacheConfig& c = cache.config();
  ATTN_CHECK(q.defined() && q.rank() == 4 && q.dim(0) == c.batch && q.dim(3) == c.head_dim &&
                 q.dim(1) % c.n_kv_heads == 0,
             "attend_cached: q must be (B, H, Tq, d) with B = ", c.batch, ", d = ", c.head_dim,
             " and H a multiple of ", c.n_kv_heads, " cached heads, got ",
             q.defined() ? q.shape_string() : "undefined");
  detail::check_finite(q, "attend_cached", "q");
  ATTN_CHECK(options.mask.empty() && options.key_lengths.empty() && options.key_starts.empty(),
             "attend_cached: explicit masks, key lengths and key starts are not supported with a "
             "cache");
  ATTN_CHECK(options.window >= 0, "attend_cached: window must be >= 0, got ", options.window);
  detail::check_variants(options, q.dim(1), "attend_cached");
  ATTN_CHECK(options.precision == Dtype::kFloat32,
             "attend_cached: bf16 products do not apply to a cache (choose its storage with "
             "KVCacheConfig::dtype)");
  ATTN_CHECK(options.causal_align == CausalAlign::kBottomRight,
             "attend_cached: top-left causal alignment does not apply to a cache (each new query "
             "sits at its own position, after the cached ones)");
  const int64_t tq = q.dim(2);
  ATTN_CHECK(tq <= cache.position(), "attend_cached: ", tq, " queries but the cache holds only ",
             cache.position(), " positions; append their keys and values first");
  // The earliest new query needs its keys back to max(0, its position − window + 1).
  const int64_t first_query = cache.position() - tq;
  const int64_t oldest_needed = window > 0 ? std::max<int64_t>(0, first_query - window + 1) : 0;
  ATTN_CHECK(oldest_needed >= cache.position() - cache.size(),
             "attend_cached: a cache of capacity ", cache.capacity(), " cannot serve ", tq,
             " new queries with window ", window,
             ": it needs capacity >= window + new queries - 1 = ", window + tq - 1);
}

// Many new queries at once (a prompt) against a cache in fixed mode, which holds every
// position from 0 in order: that is the fused forward's problem — causal, the queries at the
// end — run on views of the cache's storage. Its register tiles took a GPT-2 prompt's
// attention (512 queries, 12 heads, d = 64) from 10.0 to 2.8 ms a layer on two Zen 3 threads,
// where the decode kernel scores one query row at a time. Fewer rows than
// detail::kDecodeRowLimit stay with the decode kernel, whose tasks split the positions so that
// even one query keeps every core busy.

// A bf16 or q8 cache is widened to float for it first — a copy of the held rows, O(T·d) against
// the O(Tq·T·d) of the attention — unless the copy would pass kMaxWidenedBytes (a short prompt
// after a very long cache), where the decode kernel reads the storage as it is.
constexpr double kMaxWidenedBytes = 256.0 * (1 << 20);

// `window` is effective_window's: 0 only when neither the cache nor the call has one, so the
// cache is in fixed mode, and a fixed cache holds positions 0 .. position() − 1 in slots 0 on.
bool fused_prefill_applies(const KVCache& cache, int64_t tq, int64_t window) {
  if (tq < detail::kDecodeRowLimit || window != 0) return false;
  const KVCacheConfig& c = cache.config();
  const double widened_bytes =
      2.0 * 4.0 * static_cast<double>(c.batch) * static_cast<double>(c.n_kv_heads) *
      static_cast<double>(cache.position()) * static_cast<double>(c.head_dim);
  return c.dtype == Dtype::kFloat32 || widened_bytes <= kMaxWidenedBytes;
}

SdpaResult fused_prefill(const Tensor& q, const KVCache& cache, const SdpaOptions& options) {
  const KVCacheConfig& c = cache.config();
  const int64_t capacity = cache.capacity(), held = cache.position();
  const Shape shape{c.batch, c.n_kv_heads, held, c.head_dim};
  const Shape strides{c.n_kv_heads * capacity * c.head_dim, capacity * c.head_dim, c.head_dim, 1};
  const int64_t floats = c.batch * c.n_kv_heads * capacity * c.head_dim;
  auto view = [&](const void* storage) {  // read only: sdpa does not write K or V
    float* data = const_cast<float*>(static_cast<const float*>(storage));
    return Tensor::from_external(data, floats, shape, strides, 0, nullptr);
  };
  SdpaOptions fused = options;
  fused.causal = true;           // bottom-right: new query i sits at position held − tq + i
  fused.return_weights = false;  // as the decode kernel: attend_cached returns no weights
  if (c.dtype != Dtype::kFloat32) return sdpa(q, cache.held_keys(), cache.held_values(), fused);
  return sdpa(q, view(cache.keys()), view(cache.values()), fused);
}

}  // namespace

SdpaResult attend_cached(const Tensor& q_in, const KVCache& cache, const SdpaOptions& options) {
  const detail::PhaseScope clock(Phase::kAttention);
  const int64_t window = effective_window(cache, options);
  check_cached_attention(q_in, cache, options, window);
  if (fused_prefill_applies(cache, q_in.dim(2), window)) return fused_prefill(q_in, cache, options);
  const Tensor q = q_in.strides().back() == 1 ? q_in : q_in.contiguous();
  const KVCacheConfig& c = cache.config();

  kernels::DecodeProblem p{};
  p.q = q.data();
  for (int i = 0; i < 3; ++i) p.q_stride[i] = q.strides()[i];
  p.k = cache.keys();
  p.v = cache.values();
  p.storage = c.dtype;
  p.batch = c.batch;
  p.heads = q.dim(1);
  p.kv_heads = c.n_kv_heads;
  p.tq = q.dim(2);
  p.d = c.head_dim;
  p.capacity = cache.capacity();
  p.position = cache.position();
  p.window = window;
  p.scale = options.scale.value_or(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  ATTN_CHECK(std::isfinite(p.scale), "attend_cached: scale must be finite, got ", p.scale);
  p.softcap = options.softcap;
  p.alibi_slopes = options.alibi_slopes.empty() ? nullptr : options.alibi_slopes.data();
  p.sinks = options.sinks.empty() ? nullptr : options.sinks.data();

  // Cached positions any query may see: [begin, position).
  const int64_t first_query = p.position - p.tq;
  int64_t begin = p.position - cache.size();
  if (window > 0) begin = std::max(begin, first_query - window + 1);
  return detail::run_decode(p, begin, nullptr);
}

}  // namespace attn
