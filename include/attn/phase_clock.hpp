// Where a process's time goes: wall time per kind of work (matrix products, the attention
// kernels, LayerNorm, GELU, …), summed over every call while the clock is on. `attn train
// --profile` prints it per training step. Off by default, when a timed call costs one load.
#pragma once

#include <array>
#include <cstdint>

namespace attn {

enum class Phase : int {
  kMatmul,        // attn::gemm and the products built on it (linear layers, the LM head)
  kAttention,     // the fused attention kernels, forward and backward
  kLayerNorm,     // forward and backward
  kGelu,          // forward and backward
  kCrossEntropy,  // softmax over the vocabulary and its gradient
  kEmbedding,     // token and position rows, forward and backward
  kOptimizer,     // zeroing the gradients, their norm, clipping and AdamW
};
inline constexpr int kPhaseCount = 7;

// A short lower-case name: "matmul", "attention", "layer_norm", …
const char* phase_name(Phase phase);

struct PhaseTotals {
  std::array<double, kPhaseCount> seconds{};
  std::array<int64_t, kPhaseCount> calls{};
};

// Starts or stops the clock (totals are kept; reset_phase_totals clears them). Only work
// called from outside the library's parallel loops is timed, and a phase inside another (a
// product inside an optimizer step) counts once, for the outer one.
void set_phase_clock(bool on);
PhaseTotals phase_totals();
void reset_phase_totals();

}  // namespace attn
