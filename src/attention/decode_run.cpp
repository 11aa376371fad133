#include "src/attention/decode_run.hpp"

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attn/threads.hpp"
#include "src/attention/flash_problem.hpp"

namespace attn::detail {

namespace {

// Whether K's or V's rows of positions [p0, p1) of cached head (b, kv_h) hold NaN or ±inf: one
// run of rows at kv_stride, or on a paged cache one run per page.
bool kv_rows_non_finite(const kernels::DecodeProblem& p, const int64_t (&kv_stride)[3], int64_t b,
                        int64_t kv_h, int64_t p0, int64_t p1) {
  const auto* k = static_cast<const float*>(p.k);
  const auto* v = static_cast<const float*>(p.v);
  if (p.page_table == nullptr) {
    return rows_non_finite(k, kv_stride, b, kv_h, p0, p1 - p0, p.d) ||
           rows_non_finite(v, kv_stride, b, kv_h, p0, p1 - p0, p.d);
  }
  for (int64_t j = p0; j < p1;) {  // page by page: the rows of one page are kv_stride apart
    const int64_t page = j / p.page_size, in_page = j % p.page_size;
    const int64_t rows = std::min(p1 - j, p.page_size - in_page);
    const int64_t start = p.page_table[page] * p.page_stride + in_page * kv_stride[2];
    if (rows_non_finite(k + start, kv_stride, 0, kv_h, 0, rows, p.d) ||
        rows_non_finite(v + start, kv_stride, 0, kv_h, 0, rows, p.d))
      return true;
    j += rows;
  }
  return false;
}

}  // namespace

kernels::DecodeProblem decode_problem_of(const AttentionDims& dims, const Tensor& q,
                                         const SdpaOptions& options) {
  kernels::DecodeProblem p{};
  p.q = q.data();
  for (int i = 0; i < 3; ++i) p.q_stride[i] = q.strides()[static_cast<size_t>(i)];
  p.batch = dims.batch;
  p.heads = dims.heads;
  p.kv_heads = dims.kv_heads;
  p.tq = dims.tq;
  p.d = dims.d;
  p.capacity = p.position = dims.tk;  // query i sits at position tk − tq + i
  p.window = options.causal ? options.window : 0;
  p.scale = dims.scale;
  p.softcap = options.softcap;
  p.alibi_slopes = options.alibi_slopes.empty() ? nullptr : options.alibi_slopes.data();
  p.sinks = options.sinks.empty() ? nullptr : options.sinks.data();
  return p;
}

int64_t first_visible_position(const kernels::DecodeProblem& p) {
  return p.window > 0 ? std::max<int64_t>(0, p.position - p.tq - p.window + 1) : 0;
}

// Tasks per thread below which a problem with its heads inside each row is still split by head:
// a task of all heads would leave the threads too few to share out evenly.
constexpr int64_t kAllHeadsTasksPerThread = 4;

SdpaResult run_decode(const kernels::DecodeProblem& p, int64_t begin,
                      std::atomic<bool>* non_finite_kv) {
  // Chunks aligned to absolute multiples of kDecodeChunk.
  const int64_t chunk0 = begin / kernels::kDecodeChunk;
  const int64_t chunks = (p.position - 1) / kernels::kDecodeChunk - chunk0 + 1;
  const int64_t groups = p.batch * p.kv_heads;

  const size_t partial_floats = kernels::decode_partial_floats(p);
  std::vector<float> partials(static_cast<size_t>(groups * chunks) * partial_floats);
  const size_t scratch_floats = kernels::decode_scratch_floats(p);
  std::vector<hwy::AlignedFreeUniquePtr<float[]>> scratch(static_cast<size_t>(num_threads()));
  const int64_t tasks = groups * chunks;
  // The strides of b, kv_h and a position: K and V as (B, Hkv, capacity, d) with rows
  // contiguous, unless the problem gives its own.
  const bool strided = p.kv_stride[2] != 0;
  const int64_t kv_stride[3] = {strided ? p.kv_stride[0] : p.kv_heads * p.capacity * p.d,
                                strided ? p.kv_stride[1] : p.capacity * p.d,
                                strided ? p.kv_stride[2] : p.d};
  // Heads inside each position's row (packed rows, pages): one task per (batch, chunk) reads
  // every head's rows of its chunk in memory order (src/kernels/decode.hpp), when that still
  // leaves each thread a few tasks; each head's partial is the same either way.
  const bool all_heads = kernels::decode_heads_in_rows(p) &&
                         p.batch * chunks >= kAllHeadsTasksPerThread * num_threads();
  // A worker's scratch (for every head when a task has them all), and a chunk's positions.
  const auto scratch_of = [&](int worker) {
    auto& buffer = scratch[static_cast<size_t>(worker)];
    if (!buffer)
      buffer = hwy::AllocateAligned<float>(scratch_floats *
                                           static_cast<size_t>(all_heads ? p.kv_heads : 1));
    return buffer.get();
  };
  const auto first_position = [&](int64_t c) {  // c: the chunk's index among this call's
    return std::max(begin, (chunk0 + c) * kernels::kDecodeChunk);
  };
  const auto end_position = [&](int64_t c) {
    return std::min(p.position, (chunk0 + c + 1) * kernels::kDecodeChunk);
  };
  auto run = [&](int64_t task, int worker) {
    const int64_t group = task / chunks, c = task % chunks;
    const int64_t p0 = first_position(c), p1 = end_position(c);
    const int64_t b = group / p.kv_heads, kv_h = group % p.kv_heads;
    if (non_finite_kv != nullptr && kv_rows_non_finite(p, kv_stride, b, kv_h, p0, p1)) {
      non_finite_kv->store(true);
    }
    kernels::decode_chunk(p, b, kv_h, p0, p1,
                          partials.data() + static_cast<size_t>(task) * partial_floats,
                          scratch_of(worker));
  };
  auto run_all_heads = [&](int64_t task, int worker) {
    const int64_t b = task / chunks, c = task % chunks;
    bool found = false;
    kernels::decode_chunk_all_heads(
        p, b, first_position(c), end_position(c),
        partials.data() + static_cast<size_t>(b * p.kv_heads * chunks + c) * partial_floats,
        static_cast<size_t>(chunks) * partial_floats, scratch_of(worker),
        non_finite_kv != nullptr ? &found : nullptr);
    if (found) non_finite_kv->store(true);
  };
  // parallel_for gives each worker its own slice of the tasks first, so from one step to the
  // next a core re-reads the same heads and positions and finds them in its own L2 (with
  // tasks handed out first come, first served, the slices wandered between the cores: bf16,
  // L = 1k, 2 threads took 63 µs per step instead of 50).
  if (all_heads) {
    parallel_for_workers(p.batch * chunks, run_all_heads);
  } else {
    parallel_for_workers(tasks, run);
  }

  // Merge each row's partials in chunk order.
  SdpaResult result{Tensor({p.batch, p.heads, p.tq, p.d}), Tensor{},
                    Tensor({p.batch, p.heads, p.tq})};
  const int64_t rows = p.heads / p.kv_heads * p.tq;
  const size_t ldo = kernels::decode_row_floats(p);
  float* out = result.output.data();  // contiguous (B, H, Tq, d): plain indexing, no checks
  float* lse = result.logsumexp.data();
  std::vector<double> o(static_cast<size_t>(p.d));
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g / p.kv_heads, kv_h = g % p.kv_heads;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = kv_h * (p.heads / p.kv_heads) + r / p.tq, i = r % p.tq;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < chunks; ++c)
        m = std::max(m, partials[(g * chunks + c) * partial_floats + r]);
      double l = 0.0;
      std::fill(o.begin(), o.end(), 0.0);
      if (m != -std::numeric_limits<float>::infinity()) {
        for (int64_t c = 0; c < chunks; ++c) {
          const float* part = partials.data() + (g * chunks + c) * partial_floats;
          const float lc = part[rows + r];
          if (lc == 0.0f) continue;  // this chunk saw no visible key for the row
          const double w = std::exp(static_cast<double>(part[r]) - m);
          l += w * lc;
          const float* oc = part + 2 * rows + r * static_cast<int64_t>(ldo);
          for (int64_t e = 0; e < p.d; ++e) o[static_cast<size_t>(e)] += w * oc[e];
        }
      }
      if (p.sinks != nullptr) {  // the sink joins the sum: m' = max(m, sink)
        const double sink = p.sinks[h], m_new = std::max<double>(m, sink);
        const double w = m == -std::numeric_limits<float>::infinity() ? 0.0 : std::exp(m - m_new);
        l = l * w + std::exp(sink - m_new);
        for (double& x : o) x *= w;
        m = static_cast<float>(m_new);
      }
      const int64_t row = (b * p.heads + h) * p.tq + i;
      for (int64_t e = 0; e < p.d; ++e) {
        out[row * p.d + e] = l > 0.0 ? static_cast<float>(o[static_cast<size_t>(e)] / l) : 0.0f;
      }
      lse[row] =
          l > 0.0 ? static_cast<float>(m + std::log(l)) : std::numeric_limits<float>::infinity();
    }
  }
  return result;
}

}  // namespace attn::detail
