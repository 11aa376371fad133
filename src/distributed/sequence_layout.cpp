// Which positions of a sequence each rank holds (include/attn/distributed.hpp).
#include <algorithm>

#include "attn/distributed.hpp"
#include "attn/error.hpp"
#include "src/distributed/ring_common.hpp"

namespace attn::distributed {
namespace {

// Run i of `runs` equal cuts of [0, t): [⌊i·t/runs⌋, ⌊(i+1)·t/runs⌋).
SequenceRun cut(int64_t t, int64_t runs, int64_t i) { return {i * t / runs, (i + 1) * t / runs}; }

}  // namespace

std::string to_string(SequenceLayout layout) {
  return layout == SequenceLayout::kZigzag ? "zigzag" : "contiguous";
}

SequenceLayout sequence_layout_from_string(const std::string& name) {
  if (name == "zigzag") return SequenceLayout::kZigzag;
  if (name == "contiguous") return SequenceLayout::kContiguous;
  throw Error("unknown sequence layout \"" + name + "\"; expected zigzag or contiguous");
}

std::vector<SequenceRun> sequence_runs(int64_t t, int ranks, int rank, SequenceLayout layout) {
  ATTN_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "sequence_runs: rank ", rank,
             " is not one of ", ranks, " ranks");
  const int64_t n = ranks;
  if (layout == SequenceLayout::kContiguous) {
    ATTN_CHECK(t >= n, "sequence_runs: a sequence of ", t, " positions cannot give each of ", n,
               " ranks one (contiguous layout: T >= ranks)");
    return {cut(t, n, rank)};
  }
  ATTN_CHECK(t >= 2 * n, "sequence_runs: a sequence of ", t, " positions cannot give each of ", n,
             " ranks two runs (zigzag layout: T >= 2 x ranks)");
  return {cut(t, 2 * n, rank), cut(t, 2 * n, 2 * n - 1 - rank)};
}

Tensor shard_sequence(const Tensor& full, int ranks, int rank, SequenceLayout layout) {
  ATTN_CHECK(full.defined() && full.rank() >= 2, "shard_sequence: need a tensor (…, T, e), got ",
             full.defined() ? full.shape_string() : "undefined");
  const std::vector<SequenceRun> runs = sequence_runs(full.dim(-2), ranks, rank, layout);
  int64_t rows = 0;
  for (const SequenceRun& run : runs) rows += run.length();
  Shape shape = full.shape();
  shape[shape.size() - 2] = rows;
  Tensor out(shape);
  int64_t at = 0;
  for (const SequenceRun& run : runs) {
    detail::rows_of(out, at, run.length())
        .copy_from(detail::rows_of(full, run.begin, run.length()));
    at += run.length();
  }
  return out;
}

}  // namespace attn::distributed
