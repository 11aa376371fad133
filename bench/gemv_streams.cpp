// How fast one thread's one-row products read their weights (src/kernels/gemv.cpp): each of
// GPT-2 small's matrix shapes, float and bfloat16, over 1 GiB of matrices of that shape (past
// any L3), read as a generated token reads them — x·W by slabs of 128 rows, as attn::gemm's
// one-row path hands them out; the logits' dot products over the whole of wte — next to the
// plain read `attn bench` measures (tools/attn/hot/bandwidth.cpp: four streams side by side),
// in the same run. A benchmark, not a test: GB/s, the best of PASSES passes.
//
//   build/release/gemv_streams [PASSES]     (default 3; one thread; ~1 minute)
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "src/kernels/gemv.hpp"
#include "tools/attn/hot/bandwidth.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kBytes = int64_t{1} << 30;
constexpr int64_t kSlabRows = 128;  // gemm's one-row x·W: slabs of this many rows

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Shape {
  const char* what;
  int64_t rows, cols;  // W as stored
  bool dots;           // x·Wᵀ (rows of W against x), else x·W
};

// GB/s of one product kind over every whole matrix of the shape that fits the buffer.
template <class W>
double product_gbps(const W* weights, const Shape& s, const std::vector<float>& x,
                    std::vector<float>& y) {
  const int64_t per_matrix = s.rows * s.cols;
  const int64_t matrices = kBytes / static_cast<int64_t>(sizeof(W)) / per_matrix;
  const auto start = Clock::now();
  for (int64_t m = 0; m < matrices; ++m) {
    const W* w = weights + m * per_matrix;
    if (s.dots) {
      attn::kernels::gemv_dots(x.data(), w, s.cols, s.rows, s.cols, 1.0f, 0.0f, y.data());
      continue;
    }
    for (int64_t r0 = 0; r0 < s.rows; r0 += kSlabRows) {
      const int64_t rows = std::min(kSlabRows, s.rows - r0);
      attn::kernels::gemv_rows(x.data() + r0, w + r0 * s.cols, rows, s.cols, s.cols, 1.0f, 0.0f,
                               y.data());
    }
  }
  return static_cast<double>(matrices * per_matrix * static_cast<int64_t>(sizeof(W))) /
         seconds_since(start) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 3;
  if (passes < 1) {
    std::fprintf(stderr, "usage: gemv_streams [PASSES >= 1]\n");
    return 2;
  }
  // Huge pages where the kernel gives them, as attn's own tensors ask for.
  void* buffer = std::aligned_alloc(size_t{2} << 20, kBytes);
  if (!buffer) {
    std::fprintf(stderr, "gemv_streams: cannot allocate 1 GiB\n");
    return 1;
  }
  ::madvise(buffer, kBytes, MADV_HUGEPAGE);
  auto* halves = static_cast<uint16_t*>(buffer);
  for (int64_t i = 0; i < kBytes / 2; ++i) halves[i] = static_cast<uint16_t>(0x3c00 + i % 7);

  const Shape shapes[] = {{"x.W    768 x 2304 (c_attn)", 768, 2304, false},
                          {"x.W    768 x 768 (attn c_proj)", 768, 768, false},
                          {"x.W    768 x 3072 (c_fc)", 768, 3072, false},
                          {"x.W   3072 x 768 (mlp c_proj)", 3072, 768, false},
                          {"x.W^T 50257 x 768 (logits)", 50257, 768, true}};
  std::vector<float> x(4096, 0.01f), y(60000);
  double plain = 0, f32[5] = {}, bf16[5] = {};
  for (int pass = 0; pass < passes; ++pass) {
    plain = std::max(plain, attn::cli::measure_read_bandwidth_gbps(1));
    for (int s = 0; s < 5; ++s) {
      f32[s] = std::max(f32[s], product_gbps(static_cast<const float*>(buffer), shapes[s], x, y));
      bf16[s] = std::max(bf16[s], product_gbps(halves, shapes[s], x, y));
    }
  }
  std::printf("one thread, 1 GiB per figure, best of %d: GB/s (%% of the plain read)\n", passes);
  std::printf("%-34s %14s %14s\n", "", "float", "bfloat16");
  for (int s = 0; s < 5; ++s) {
    std::printf("%-34s %7.1f (%3.0f%%) %7.1f (%3.0f%%)\n", shapes[s].what, f32[s],
                100 * f32[s] / plain, bf16[s], 100 * bf16[s] / plain);
  }
  std::printf("%-34s %7.1f\n", "plain read (attn bench's probe)", plain);
  std::free(buffer);
  return 0;
}
