// K and V as the AMX forward reads them (src/kernels/amx_tiles.hpp), packed once per call:
// K as bfloat16 rows, V transposed (its rows are the tiles' A operand of Oᵀ += Vᵀ·P). A copy
// of T·(d + dv) values per head against attention's T²·(d + dv) products. Internal.
#pragma once

#include <cstdint>
#include <memory>

#include "src/kernels/flash_problem.hpp"

namespace attn::detail {

struct AmxOperands {
  std::unique_ptr<uint16_t[]> keys, values_t;  // every element written (padding as zeros)
};

// When p's products are bf16 and the CPU runs them on AMX (amx_bf16_usable): packs p's K and
// V (already rounded to bfloat16) into `storage` and points p's amx_* fields at it. Otherwise
// leaves p as it is (amx_keys stays nullptr), and the vector kernels run.
void attach_amx_operands(kernels::FlashProblem& p, AmxOperands& storage);

}  // namespace attn::detail
