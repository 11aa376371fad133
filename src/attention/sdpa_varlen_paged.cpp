// Packed queries against a paged K/V cache (attn/sdpa_varlen.hpp): each sequence's keys are the
// rows of the pages its block table names, in that order. A decode step reads the pages where
// they lie: the decode kernel's tasks walk a page's rows at their stride and look up the next
// page at its end (DecodeProblem::page_table). Any other sequence has its pages gathered into
// consecutive rows and goes through attn::sdpa: a prompt reads every key row once per query
// block, so one copy first is the cheaper way, and it keeps every kernel and option of sdpa.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "attn/error.hpp"
#include "attn/sdpa_varlen.hpp"
#include "src/attention/decode_run.hpp"
#include "src/attention/fused.hpp"
#include "src/attention/packed_offsets.hpp"
#include "src/reference/checks.hpp"
#include "src/reference/finite.hpp"

namespace attn {
namespace {

struct PagedDims {
  int64_t sequences, pages, page_size, heads, kv_heads, d, dv;
};

PagedDims check_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                      const std::vector<int64_t>& cu_q,
                      const std::vector<std::vector<int64_t>>& block_table,
                      const std::vector<int64_t>& seqused_k, const SdpaOptions& options) {
  ATTN_CHECK(q.defined() && k_pages.defined() && v_pages.defined() && q.rank() == 3 &&
                 k_pages.rank() == 4 && v_pages.rank() == 4,
             "sdpa_varlen_paged: q must be packed (total, heads, d) and k_pages, v_pages "
             "(pages, page_size, kv_heads, d)");
  ATTN_CHECK(k_pages.dim(0) == v_pages.dim(0) && k_pages.dim(1) == v_pages.dim(1) &&
                 k_pages.dim(2) == v_pages.dim(2) && k_pages.dim(3) == q.dim(2),
             "sdpa_varlen_paged: k_pages (", k_pages.shape_string(), ") and v_pages (",
             v_pages.shape_string(),
             ") must share pages, page size and heads, and k's width "
             "must be q's (",
             q.dim(2), ")");
  detail::check_offsets(cu_q, q.dim(0), "sdpa_varlen_paged", "cu_seqlens_q");
  const auto sequences = static_cast<int64_t>(cu_q.size()) - 1;
  ATTN_CHECK(static_cast<int64_t>(block_table.size()) == sequences &&
                 static_cast<int64_t>(seqused_k.size()) == sequences,
             "sdpa_varlen_paged: block_table has ", block_table.size(), " rows and seqused_k ",
             seqused_k.size(), " counts for ", sequences, " sequences: one each");
  const int64_t pages = k_pages.dim(0), page_size = k_pages.dim(1);
  for (size_t s = 0; s < block_table.size(); ++s) {
    const int64_t used = seqused_k[s];
    const auto held = static_cast<int64_t>(block_table[s].size());
    ATTN_CHECK(used >= 0 && (used == 0 || used <= held * page_size),
               "sdpa_varlen_paged: ", "seqused_k[", s, "] = ", used, " does not fit in the ", held,
               " pages of ", page_size, " tokens that block_table gives sequence ", s);
    for (int64_t i = 0; i < (used + page_size - 1) / std::max<int64_t>(page_size, 1); ++i) {
      const int64_t page = block_table[s][static_cast<size_t>(i)];
      ATTN_CHECK(page >= 0 && page < pages, "sdpa_varlen_paged: block_table[", s, "][", i,
                 "] = ", page, " is outside the ", pages, " pages");
    }
  }
  ATTN_CHECK(options.mask.empty() && options.key_lengths.empty() && options.key_starts.empty() &&
                 !options.return_weights && !options.return_mask_gradient,
             "sdpa_varlen_paged: masks, key_lengths, key_starts and weights are not taken: "
             "seqused_k says how many keys each sequence has");
  // The options against the heads and widths (scale, window, the variants' counts), before
  // any sequence reads them, also when none has keys.
  detail::check_attention(Shape{1, q.dim(1), 1, q.dim(2)}, Shape{1, k_pages.dim(2), 1, q.dim(2)},
                          Shape{1, k_pages.dim(2), 1, v_pages.dim(3)}, options);
  return {sequences, pages, page_size, q.dim(1), k_pages.dim(2), q.dim(2), v_pages.dim(3)};
}

// Sequence s's keys (or values) gathered from their pages into a consecutive (1, Hkv, used, w).
Tensor gathered(const Tensor& pages, const std::vector<int64_t>& table, int64_t used) {
  const int64_t page_size = pages.dim(1), heads = pages.dim(2), width = pages.dim(3);
  Tensor rows = Tensor::uninitialized({used, heads, width});
  for (int64_t j = 0; j < used; j += page_size) {
    const int64_t n = std::min(page_size, used - j);
    rows.slice(j, n).copy_from(pages.select(table[static_cast<size_t>(j / page_size)]).slice(0, n));
  }
  return rows.permute({1, 0, 2}).contiguous().reshape({1, heads, used, width});
}

SdpaResult decode_from_pages(const detail::AttentionDims& dims, const Tensor& q4,
                             const Tensor& k_pages, const Tensor& v_pages,
                             const std::vector<int64_t>& table, const SdpaOptions& options) {
  kernels::DecodeProblem p = detail::decode_problem_of(dims, q4, options);
  p.k = k_pages.data();
  p.v = v_pages.data();
  // Within a page: a head's rows are a row of (Hkv, d) apart; pages where the table says.
  p.kv_stride[0] = 0;
  p.kv_stride[1] = k_pages.strides()[2];
  p.kv_stride[2] = k_pages.strides()[1];
  p.page_table = table.data();
  p.page_size = k_pages.dim(1);
  p.page_stride = k_pages.strides()[0];
  const int64_t begin = detail::first_visible_position(p);
  std::atomic<bool> non_finite_kv{false};
  SdpaResult result = detail::run_decode(p, begin, &non_finite_kv);
  ATTN_CHECK(!non_finite_kv.load(),
             "sdpa_varlen_paged: k_pages or v_pages holds NaN or inf in "
             "a row a sequence reads");
  return result;
}

}  // namespace

SdpaResult sdpa_varlen_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                             const std::vector<int64_t>& cu_seqlens_q,
                             const std::vector<std::vector<int64_t>>& block_table,
                             const std::vector<int64_t>& seqused_k, const SdpaOptions& options) {
  const PagedDims dims =
      check_paged(q, k_pages, v_pages, cu_seqlens_q, block_table, seqused_k, options);
  SdpaResult result{Tensor::uninitialized({q.dim(0), dims.heads, dims.dv}), Tensor{},
                    Tensor::uninitialized({q.dim(0), dims.heads})};
  for (int64_t s = 0; s < dims.sequences; ++s) {
    const auto at = static_cast<size_t>(s);
    const int64_t q0 = cu_seqlens_q[at], lq = cu_seqlens_q[at + 1] - q0, used = seqused_k[at];
    if (lq == 0) continue;
    // This sequence's rows of the packed output and logsumexp, as (H, lq, ·) views.
    Tensor out_rows = result.output.slice(q0, lq).permute({1, 0, 2});
    Tensor lse_rows = result.logsumexp.slice(q0, lq).permute({1, 0});
    if (used == 0) {  // no key at all: zeros, logsumexp +inf, or the sink
      out_rows.copy_from(Tensor(out_rows.shape()));
      for (int64_t h = 0; h < dims.heads; ++h) {
        const float l = options.sinks.empty() ? INFINITY : options.sinks[static_cast<size_t>(h)];
        for (int64_t i = 0; i < lq; ++i) result.logsumexp.data()[(q0 + i) * dims.heads + h] = l;
      }
      continue;
    }
    const detail::AttentionDims one_dims = detail::check_attention(
        Shape{1, dims.heads, lq, dims.d}, Shape{1, dims.kv_heads, used, dims.d},
        Shape{1, dims.kv_heads, used, dims.dv}, options);
    const Tensor q4 = detail::as_rank4(q.slice(q0, lq).permute({1, 0, 2}));
    SdpaResult one;
    // A decode step reads the pages in place (a page's rows step by its dim 1).
    if (detail::decode_rows_apply(k_pages, v_pages, 1, dims.d) &&
        detail::decode_step_applies(one_dims, q4, options)) {
      detail::check_finite(q4, "sdpa_varlen_paged", "q");
      one = decode_from_pages(one_dims, q4, k_pages, v_pages, block_table[at], options);
    } else {
      one = sdpa(q4, gathered(k_pages, block_table[at], used),
                 gathered(v_pages, block_table[at], used), options);
    }
    out_rows.copy_from(one.output.select(0));
    lse_rows.copy_from(one.logsumexp.select(0));
  }
  return result;
}

}  // namespace attn
