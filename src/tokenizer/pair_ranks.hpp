// The map BpeTokenizer looks merges up in: a pair of token ids (left, right) -> the merge's
// rank. Encoding asks it for every adjacent pair of every new word, so it is a flat table
// with open addressing — std::unordered_map's node per entry made a third of encoding a
// chase of pointers. Keys are both ids packed in 64 bits (ids < 2^24). Used through
// BpeTokenizer and Gpt2Tokenizer, behind their pointers; internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace attn::detail {

class PairRanks {
 public:
  // No such merge: after every real rank, so the earliest merge is a plain minimum.
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

  // The rank of (left, right), or kNone.
  int64_t find(int64_t left, int64_t right) const {
    if (slots_.empty()) return kNone;
    const uint64_t key = pack(left, right);
    for (size_t i = spread(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].rank;
      if (slots_[i].key == kEmpty) return kNone;
    }
  }
  bool contains(int64_t left, int64_t right) const { return find(left, right) != kNone; }

  // Adds (left, right) -> rank; an existing pair keeps its rank.
  void insert(int64_t left, int64_t right, int64_t rank) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const uint64_t key = pack(left, right);
    size_t i = spread(key) & mask_;
    for (; slots_[i].key != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
    }
    slots_[i] = {key, rank};
    ++size_;
  }

 private:
  struct Slot {
    uint64_t key;
    int64_t rank;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // no pair of ids < 2^24 packs to this

  static uint64_t pack(int64_t left, int64_t right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
  }
  // Mixes the bits, so that pairs differing only in the high (left) half land apart.
  static uint64_t spread(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 29);
  }

  void grow() {
    std::vector<Slot> old(slots_.empty() ? 64 : 2 * slots_.size(), Slot{kEmpty, kNone});
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      size_t i = spread(s.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace attn::detail
