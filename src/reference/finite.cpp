#include "src/reference/finite.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "src/kernels/reductions.hpp"

namespace attn::detail {
namespace {

// True when one of the n floats at x, `stride` apart, is NaN or ±inf.
bool row_has_non_finite(const float* x, int64_t n, int64_t stride) {
  if (stride == 1) return kernels::any_non_finite(x, 1, n, 1);
  bool found = false;
  for (int64_t i = 0; i < n && !found; ++i) found = !std::isfinite(x[i * stride]);
  return found;
}

std::string index_text(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return to_string(index);
}

}  // namespace

void check_finite(const Tensor& t, const char* where, const char* name) {
  if (!t.defined()) return;
  // A dim of stride 0 (a broadcast view) repeats one element: it is read once, at index 0,
  // which is where the first non-finite value in row-major order lies too.
  Shape shape = t.shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (t.strides()[d] == 0) shape[d] = 1;
  }
  // Dims laid out one after the other (a contiguous tensor: all of them) are scanned as one
  // long row: a loop per row of 64 floats cost more than the scan itself.
  Shape rows(shape.begin(), shape.end() - 1),
      row_strides(t.strides().begin(), t.strides().end() - 1);
  int64_t width = shape.back();
  const int64_t stride = t.strides().back();
  while (!rows.empty() && (rows.back() == 1 || row_strides.back() == width * stride)) {
    width *= rows.back();
    rows.pop_back();
    row_strides.pop_back();
  }
  const float* data = t.data();
  std::vector<int64_t> row_offsets;
  for_each_offset(rows, row_strides,
                  [&](int64_t, int64_t offset) { row_offsets.push_back(offset); });

  // Pieces of about kPiece floats (several short rows, or a part of a long one), scanned on
  // every thread when there are enough of them: a backward's five inputs scanned serially
  // cost 8 % of its time on two threads. The first piece that holds a non-finite value, in
  // row-major order, holds the element the message names.
  constexpr int64_t kPiece = int64_t{1} << 14;
  const int64_t row_count = static_cast<int64_t>(row_offsets.size());
  const int64_t rows_per_piece = std::max<int64_t>(1, kPiece / width);
  const int64_t parts = (width + kPiece - 1) / kPiece;  // of a row
  const int64_t pieces = (row_count + rows_per_piece - 1) / rows_per_piece * parts;
  struct Span {
    int64_t first_row, end_row, start, length;
  };
  auto span_of = [&](int64_t piece) {
    const int64_t group = piece / parts, start = piece % parts * kPiece;
    return Span{group * rows_per_piece, std::min(row_count, (group + 1) * rows_per_piece), start,
                std::min(kPiece, width - start)};
  };
  std::atomic<int64_t> first_bad{pieces};
  auto scan = [&](int64_t piece) {
    const Span s = span_of(piece);
    for (int64_t r = s.first_row; r < s.end_row; ++r) {
      if (row_has_non_finite(data + row_offsets[r] + s.start * stride, s.length, stride)) {
        int64_t seen = first_bad.load();
        while (piece < seen && !first_bad.compare_exchange_weak(seen, piece)) {
        }
        return;
      }
    }
  };
  if (pieces >= 8) {
    parallel_for(pieces, scan);
  } else {
    for (int64_t piece = 0; piece < pieces; ++piece) scan(piece);
  }
  if (first_bad.load() == pieces) return;

  const Span s = span_of(first_bad.load());
  int64_t bad_row = s.first_row, column = s.start;
  while (!row_has_non_finite(data + row_offsets[bad_row] + s.start * stride, s.length, stride)) {
    ++bad_row;
  }
  const int64_t bad_row_offset = row_offsets[bad_row];
  while (std::isfinite(data[bad_row_offset + column * stride])) ++column;
  std::ostringstream message;
  message << where << ": " << name << " holds " << data[bad_row_offset + column * stride] << " at "
          << index_text(shape, bad_row * width + column)
          << "; attn refuses NaN and ±inf in its inputs";
  throw Error::about_argument(name, message.str());
}

}  // namespace attn::detail
