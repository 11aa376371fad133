// K and V as the AMX kernels read them (src/kernels/amx_tiles.hpp), packed once per call: as
// bfloat16 rows (the tiles' A operand of Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ) and transposed (of
// Oᵀ += Vᵀ·Pᵀ and dQᵀ += Kᵀ·dSᵀ). A copy of T·(d + dv) values per head against attention's
// T²·(d + dv) products. Internal.
#pragma once

#include <cstdint>
#include <memory>

#include "src/kernels/flash_problem.hpp"

namespace attn::detail {

// The packed matrices' storage; every element is written (padding as zeros).
struct AmxOperands {
  std::unique_ptr<uint16_t[]> keys, values_t, keys_t, values;
};

enum class AmxPass { kForward, kBackward };

// When p's products are bf16 and the CPU runs them on AMX (amx_bf16_usable): packs what the
// pass reads of p's K and V (already rounded to bfloat16) into `storage` and points p's amx_*
// fields at it. Otherwise leaves p as it is (null), and the vector kernels run.
void attach_amx_operands(kernels::FlashProblem& p, AmxPass pass, AmxOperands& storage);

}  // namespace attn::detail
