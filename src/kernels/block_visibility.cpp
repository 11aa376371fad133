#include "src/kernels/block_visibility.hpp"

#include <algorithm>

namespace attn::kernels {

KeyRange visible_keys(const FlashProblem& p, int64_t b, int64_t q0, int64_t rows) {
  // Query row r sits at position query_position0 + r.
  const int64_t first_position = p.query_position0 + q0;
  const int64_t last_position = first_position + rows - 1;
  KeyRange range{0, p.tk};
  if (p.key_lengths != nullptr) range.end = std::min(range.end, p.key_lengths[b]);
  if (p.causal || p.window > 0) range.end = std::min(range.end, last_position + 1);
  if (p.window > 0) range.begin = std::max<int64_t>(0, first_position - p.window + 1);
  if (p.key_starts != nullptr) range.begin = std::max(range.begin, p.key_starts[b]);
  if (range.begin >= range.end) return {0, 0};  // nothing to see: the rows come out zero
  range.begin = range.begin / kKeyBlock * kKeyBlock;
  return range;
}

DiagonalCut diagonal_cut(const FlashProblem& p, int64_t q0, size_t rows, int64_t j0, size_t cols) {
  return {p.causal || p.window > 0, p.query_position0 + q0 - j0, rows, cols};
}

size_t DiagonalCut::keys_seen_by(size_t r_end) const {
  if (!applies) return cols;
  return static_cast<size_t>(
      std::clamp<int64_t>(offset + static_cast<int64_t>(r_end), 0, static_cast<int64_t>(cols)));
}

size_t DiagonalCut::first_query_seeing(size_t c) const {
  if (!applies) return 0;
  return static_cast<size_t>(
      std::clamp<int64_t>(static_cast<int64_t>(c) - offset, 0, static_cast<int64_t>(rows)));
}

}  // namespace attn::kernels
