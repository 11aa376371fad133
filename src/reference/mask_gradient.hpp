// The gradient of an additive mask (SdpaOptions::return_mask_gradient): the (…, Tq, Tk)
// score gradient dS that both backward paths produce, summed over the dims along which the
// mask is broadcast, in the mask's own shape. Internal to the library.
#pragma once

#include <initializer_list>

#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn::detail {

// Refuses return_mask_gradient without an additive mask; `where` starts the message.
void check_mask_gradient_request(const SdpaOptions& options, const char* where);

// The buffer a caller hands sdpa_backward for the mask's gradient: the mask's shape,
// contiguous, overlapping no memory of the mask or `inputs` (the kernels read them while they
// write it). Throws attn::Error saying which rule it breaks.
void check_mask_gradient_buffer(const Tensor& dmask, const SdpaOptions& options,
                                std::initializer_list<const Tensor*> inputs);

// score_gradient (…, Tq, Tk) (the scores' shape), contiguous, summed into mask.values's shape
// (the mask right-aligned against the scores, as broadcast_mask views it). Sums run in
// double, in index order: the same bits for any thread count.
Tensor reduce_to_mask_shape(const Tensor& score_gradient, const Mask& mask);

}  // namespace attn::detail
