// The map BpeTokenizer finds a token's id with, from its bytes: a flat table of ids with open
// addressing, whose keys are the tokenizer's own token strings — 4 bytes a slot instead of a
// std::unordered_map node holding a copy of each string (a quarter of a MiB for 4096 tokens,
// a large part of a loaded tokenizer). The tokens are passed to each call, so a copied
// tokenizer never points into another one. Used through BpeTokenizer, behind its pointer; internal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::detail {

class TokenIndex {
 public:
  // The id whose token is `bytes`, or −1.
  int64_t find(std::string_view bytes, const std::vector<std::string>& tokens) const {
    if (slots_.empty()) return -1;
    for (size_t i = std::hash<std::string_view>{}(bytes)&mask_;; i = (i + 1) & mask_) {
      if (slots_[i] < 0) return -1;
      if (tokens[static_cast<size_t>(slots_[i])] == bytes) return slots_[i];
    }
  }

  // Indexes id, whose bytes are tokens[id]; when another id has the same bytes, it keeps them.
  void insert(int64_t id, const std::vector<std::string>& tokens) {
    if (2 * (size_ + 1) > slots_.size()) grow(tokens);
    const std::string& bytes = tokens[static_cast<size_t>(id)];
    size_t i = std::hash<std::string_view>{}(bytes)&mask_;
    for (; slots_[i] >= 0; i = (i + 1) & mask_) {
      if (tokens[static_cast<size_t>(slots_[i])] == bytes) return;
    }
    slots_[i] = static_cast<int32_t>(id);  // ids < 2^24
    ++size_;
  }

 private:
  void grow(const std::vector<std::string>& tokens) {
    std::vector<int32_t> old(slots_.empty() ? 64 : 2 * slots_.size(), -1);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (int32_t id : old) {
      if (id < 0) continue;
      size_t i = std::hash<std::string_view>{}(tokens[static_cast<size_t>(id)]) & mask_;
      while (slots_[i] >= 0) i = (i + 1) & mask_;
      slots_[i] = id;
    }
  }

  std::vector<int32_t> slots_;  // ids, −1 for an empty slot
  size_t mask_ = 0, size_ = 0;
};

}  // namespace attn::detail
