// The loss curve as an SVG picture: each step's training loss, and the evaluated train and
// validation losses, against the iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attn::cli {

struct LossHistory {
  std::vector<std::pair<int64_t, float>> steps;                // (iter, batch loss)
  std::vector<std::tuple<int64_t, float, float>> evaluations;  // (iter, train, val)
};

// An SVG document of `history` (empty axes when there is nothing yet).
std::string loss_svg(const LossHistory& history);

}  // namespace attn::cli
