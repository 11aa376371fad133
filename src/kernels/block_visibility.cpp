#include "src/kernels/block_visibility.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/kernels/explicit_mask.hpp"

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

void mask_block(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, size_t rows, int64_t j0,
                size_t cols, float additive_scale, float* st, size_t ldq) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const int64_t first_position = p.query_position0 + q0;
  const auto n = static_cast<int64_t>(rows);
  // Most blocks lie wholly below the diagonal (and inside the window): without an explicit
  // mask there is nothing to do, and walking their keys cost 1 % of the causal forward.
  const int64_t last_key = j0 + static_cast<int64_t>(cols) - 1;
  const bool every_query_sees_every_key =
      (!p.causal && p.window == 0) ||
      (last_key <= first_position && (p.window == 0 || j0 > first_position + n - 1 - p.window));
  const int64_t key_start = p.key_starts != nullptr ? p.key_starts[b] : 0;
  if (every_query_sees_every_key && p.mask == nullptr && j0 >= key_start) return;
  for (size_t c = 0; c < cols; ++c) {
    float* key_row = st + c * ldq;
    const int64_t j = j0 + static_cast<int64_t>(c);
    if (j < key_start) {  // left padding: no query sees it
      std::fill(key_row, key_row + n, kMinusInf);
      continue;
    }
    if (p.causal || p.window > 0) {
      // Query r (position first_position + r) sees key j when j <= position, i.e. r >= j − first.
      const int64_t first_seeing = std::clamp<int64_t>(j - first_position, 0, n);
      std::fill(key_row, key_row + first_seeing, kMinusInf);
      if (p.window > 0) {  // and when position < j + window
        const int64_t last_seeing = std::clamp<int64_t>(j + p.window - first_position, 0, n);
        std::fill(key_row + last_seeing, key_row + n, kMinusInf);
      }
    }
  }
  if (p.mask != nullptr) {  // keys of left padding are -inf already and stay so
    const auto first =
        static_cast<size_t>(std::clamp<int64_t>(key_start - j0, 0, static_cast<int64_t>(cols)));
    apply_explicit_mask(p, b, h, q0, n, j0, first, cols, additive_scale, st, ldq);
  }
}

}  // namespace attn::kernels
