// K and V as the AMX kernels read them (src/kernels/amx_tiles.hpp), packed once per call: as
// bfloat16 rows (the tiles' A operand of Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ) and transposed (of
// Oᵀ += Vᵀ·Pᵀ and dQᵀ += Kᵀ·dSᵀ). A copy of T·(d + dv) values per head against attention's
// T²·(d + dv) products. Internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "attn/sdpa.hpp"
#include "src/core/kept_buffer.hpp"
#include "src/kernels/flash_problem.hpp"

namespace attn::detail {

// The packed matrices' storage, one block for all of them, kept by the calling thread for its
// next call (kept_buffer.hpp: fresh blocks were faulted in every call); every element is written
// (padding as zeros).
struct AmxOperands {
  std::optional<KeptBuffer> storage;
};

enum class AmxPass { kForward, kBackward };

// Whether a call with these options runs its products on packed tiles: bf16 products on a CPU
// where amx_bf16_usable() (AMX tiles) or, without AMX, dpbf16_usable() (AVX-512 BF16's
// vdpbf16ps on the same packed operands, in registers: src/kernels/dpbf16_tiles.hpp). Asked once
// per call, because it also decides how the forward's Q, K and V are rounded to bfloat16: as the
// tiles' packing reads them (the caller's floats, no copy: a whole-tensor rounded copy of each
// was 11 % of the causal forward at T = 1024 on an AMX Xeon), or up front for the vector
// kernels, which read rounded floats. ("amx" in these names is the route; FlashProblem::amx_tiles
// says which instructions run it.)
bool products_on_amx(const SdpaOptions& options);

// For a call where products_on_amx: packs what the pass reads of p's K and V (rounding them to
// bfloat16) into `storage`, points p's amx_* fields at it and sets p.amx_tiles. Without such fields
// the vector kernels run. With non_finite_input, also scans K and V for NaN and ±inf as it packs
// them (the tasks then scan only their query rows: their own scan of K and V read them from memory
// once more, 3 % of the bf16 forward at T = 1024) and sets it when it finds one.
void attach_amx_operands(kernels::FlashProblem& p, AmxPass pass, AmxOperands& storage,
                         std::atomic<bool>* non_finite_input);

}  // namespace attn::detail
