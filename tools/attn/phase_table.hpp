// Where a pass's time went, per phase (attn/phase_clock.hpp), as a table on stdout: ms per
// pass and share of it, and for the products and attention their FLOPs, GFLOP/s and share of
// the FMA peak. `attn train --profile` prints one per step, `attn bench generate --profile`
// one per prompt.
#pragma once

#include "attn/phase_clock.hpp"

namespace attn::cli {

struct PassFlops {
  double matmul = 0.0, attention = 0.0;
};

// totals summed over `passes` passes that took pass_ms each on average; `pass_name` labels the
// last row ("step", "prompt"). Phases that never ran are left out.
void print_phase_table(const PhaseTotals& totals, double passes, double pass_ms,
                       const PassFlops& flops, double peak_gflops, const char* pass_name);

}  // namespace attn::cli
