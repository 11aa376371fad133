#include "src/kernels/block_visibility.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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

namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// value·scale, finite where value is: a mask of float's lowest value (Hugging Face's) would
// overflow to -inf in base 2, and a row masked so everywhere would see no key instead of all
// keys equally, as it does in base e.
float scaled_mask_value(float value, float scale) {
  if (!std::isfinite(value)) return value;
  return std::clamp(value * scale, std::numeric_limits<float>::lowest(),
                    std::numeric_limits<float>::max());
}

// The explicit mask of the block, read a query's row at a time — along its keys, as it lies in
// memory. (Down each key's column, every element was a row of the mask away from the last: with
// a (H, T, T) mask at T = 4096, the causal forward ran 5x slower than without one.) Keys of
// left padding (j < key_start) are -inf already and stay so.
void apply_explicit_mask(const FlashProblem& p, int64_t b, int64_t h, int64_t q0, int64_t rows,
                         int64_t j0, size_t cols, int64_t key_start, float additive_scale,
                         float* st, size_t ldq) {
  const size_t first =
      static_cast<size_t>(std::clamp<int64_t>(key_start - j0, 0, static_cast<int64_t>(cols)));
  const float* base = p.mask + b * p.mask_stride[0] + h * p.mask_stride[1] + j0 * p.mask_stride[3];
  for (int64_t r = 0; r < rows; ++r) {
    const float* m = base + (q0 + r) * p.mask_stride[2];
    float* score = st + r;
    if (p.mask_kind == MaskKind::kBoolean) {
      for (size_t c = first; c < cols; ++c) {
        if (m[static_cast<int64_t>(c) * p.mask_stride[3]] == 0.0f) score[c * ldq] = kMinusInfinity;
      }
    } else {
      for (size_t c = first; c < cols; ++c) {
        score[c * ldq] +=
            scaled_mask_value(m[static_cast<int64_t>(c) * p.mask_stride[3]], additive_scale);
      }
    }
  }
}

}  // namespace

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
  if (p.mask != nullptr)
    apply_explicit_mask(p, b, h, q0, n, j0, cols, key_start, additive_scale, st, ldq);
}

}  // namespace attn::kernels
