// The merge loop both BPE tokenizers share: a word's tokens, merged in rank order. Internal to
// the library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "src/tokenizer/pair_ranks.hpp"

namespace attn::detail {

// Merges the tokens of one word in place: each time the adjacent pair with the earliest merge
// (the lowest rank), every occurrence left to right, becomes merged_id(rank). merges[rank] is
// the pair a rank merges; ranks.find(left, right) its rank. Each adjacent pair's rank is looked
// up once and again only when a merge changes one of its two tokens.
template <typename MergedId>
void apply_merges(std::vector<int64_t>& symbols, const PairRanks& merge_rank,
                  const std::vector<std::pair<int64_t, int64_t>>& merges, MergedId merged_id) {
  constexpr int64_t kNone = PairRanks::kNone;  // no merge for this pair
  // Scratch kept per thread: four fresh vectors per word made malloc a fifth of encoding.
  thread_local std::vector<int64_t> ranks, next_symbols, next_ranks;
  thread_local std::vector<size_t> from;  // next_symbols[k] came from symbols[from[k]]
  ranks.assign(symbols.empty() ? 0 : symbols.size() - 1, kNone);
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = merge_rank.find(symbols[i], symbols[i + 1]);
  for (;;) {
    const auto best = std::min_element(ranks.begin(), ranks.end());
    if (best == ranks.end() || *best == kNone) break;
    const int64_t rank = *best;
    const auto [left, right] = merges[static_cast<size_t>(rank)];
    const int64_t merged = merged_id(rank);
    next_symbols.clear();
    from.clear();
    for (size_t i = 0; i < symbols.size(); ++i) {
      from.push_back(i);
      if (i + 1 < symbols.size() && ranks[i] == rank && symbols[i] == left &&
          symbols[i + 1] == right) {
        next_symbols.push_back(merged);
        ++i;
      } else {
        next_symbols.push_back(symbols[i]);
      }
    }
    next_ranks.assign(next_symbols.empty() ? 0 : next_symbols.size() - 1, kNone);
    for (size_t k = 0; k < next_ranks.size(); ++k) {
      const bool unchanged = next_symbols[k] != merged && next_symbols[k + 1] != merged;
      next_ranks[k] =
          unchanged ? ranks[from[k]] : merge_rank.find(next_symbols[k], next_symbols[k + 1]);
    }
    symbols.swap(next_symbols);
    ranks.swap(next_ranks);
  }
}

}  // namespace attn::detail
