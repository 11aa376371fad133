// The cap on what one call allocates: the memory the machine has available when the call
// starts. A shape asked for past it (a stride-0 view whose T×T weights or vocabulary-wide
// logits would need 64 GiB) is refused with a message that names it, before any memory is
// touched, rather than by std::bad_alloc, or by the kernel's OOM killer part-way through.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attn/tensor.hpp"

namespace attn::detail {

// MemAvailable of /proc/meminfo in bytes: what the kernel estimates can be allocated without
// swapping; nothing when it cannot be read (not Linux, or an old kernel). The CLI's checks of
// what a command would need read it here too.
std::optional<uint64_t> available_memory_bytes();

// bytes as "48.0 GiB", the way every memory message says a size.
std::string gibibytes_text(double bytes);

// attn::Error "<what> needs N GiB, more than this machine has available (M GiB of T GiB)"
// when `floats` float32 values would not fit in the memory available now (MemAvailable of
// /proc/meminfo, read only for requests past 1 GiB, so small tensors cost nothing).
void check_fits_in_memory(double floats, const std::string& what);

// The same for one tensor of `shape` (dims ≥ 1, checked before): "<what> (a, b, c) needs …".
void check_fits_in_memory(const Shape& shape, const char* what);

}  // namespace attn::detail
