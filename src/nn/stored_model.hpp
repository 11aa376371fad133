// What every reader of a stored model checks — attn's checkpoints (src/train/) and Hugging
// Face's files (src/hf/) — before and while it builds the model; the messages start with
// `prefix` (e.g. "checkpoint: "). Internal to the library.
#pragma once

#include <cstdint>
#include <string>

#include "attn/gpt.hpp"
#include "attn/io.hpp"

namespace attn::detail {

// Before a model is built from a stored config: the file holds at least `copies` × the floats
// the config needs (parameters, and AdamW's two moments when resuming), so a tiny file cannot
// make the reader allocate a model of any size.
void check_file_holds(const Safetensors& file, const GptConfig& config, int64_t copies,
                      const std::string& prefix);
// The stored tensor `name` (null when the file lacks it) for parameter p: present, of p's
// shape, every value finite (a NaN would otherwise surface later, far from its cause).
const Tensor& checked_parameter(const Tensor* stored, const std::string& name,
                                const GptParameter& p, const std::string& prefix);

}  // namespace attn::detail
