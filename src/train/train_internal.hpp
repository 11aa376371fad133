// What the trainer and its checkpoints share. Internal to the library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attn/io.hpp"
#include "attn/train.hpp"

namespace attn::detail {

// FNV-1a over the token ids: resume checks it is given the tokens it was trained on.
uint64_t token_fingerprint(const std::vector<int64_t>& tokens);
// attn::Error for an option out of range.
void check_options(const TrainOptions& options);

// What every reader of stored models checks (checkpoints, Hugging Face files); the messages
// start with `prefix` (e.g. "checkpoint: ").
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
