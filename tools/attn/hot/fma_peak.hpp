// The machine's fp32 FMA peak, measured: every thread runs independent chains of vector FMAs.
#pragma once

namespace attn::cli {

// GFLOP/s (2 per FMA lane) with `threads` threads, best of a few short runs (~0.2 s in all).
double measure_fma_peak_gflops(int threads);

}  // namespace attn::cli
