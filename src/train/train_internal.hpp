// What the trainer and its checkpoints share. Internal to the library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attn/train.hpp"

namespace attn::detail {

// FNV-1a over the token ids: resume checks it is given the tokens it was trained on.
uint64_t token_fingerprint(const std::vector<int64_t>& tokens);
// attn::Error for an option out of range.
void check_options(const TrainOptions& options);

}  // namespace attn::detail
