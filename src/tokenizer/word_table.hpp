// A hash table from words (views into a text that outlives the table) to small integers:
// open addressing with linear probing over a power-of-two array of slots, each holding the
// word's hash, so most probes compare one integer. Counting the words of tinyshakespeare
// with std::unordered_map<std::string_view, …> took 26 ms of a 60 ms encode; this takes
// a fraction of that. Internal to the library.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace attn::detail {

class WordTable {
 public:
  explicit WordTable(size_t expected = 1024) { rehash(capacity_for(expected)); }

  // The value of `word`, inserting it with `value_if_new` when absent; `inserted` says which.
  uint32_t find_or_insert(std::string_view word, uint32_t value_if_new, bool& inserted) {
    if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
    const uint64_t h = hash(word);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.word.data() == nullptr) {
        s = {h, word, value_if_new};
        ++size_;
        inserted = true;
        return value_if_new;
      }
      if (s.hash == h && s.word == word) {
        inserted = false;
        return s.value;
      }
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    std::string_view word{};  // data() == nullptr: empty slot
    uint32_t value = 0;
  };

  // FNV-1a: words are a few bytes long, where a simple byte loop is as fast as any.
  static uint64_t hash(std::string_view word) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : word) h = (h ^ c) * 1099511628211ull;
    return h ^ (h >> 29);
  }

  static size_t capacity_for(size_t expected) {
    size_t c = 16;
    while (c < 2 * expected) c *= 2;
    return c;
  }

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.word.data() == nullptr) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].word.data() != nullptr) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace attn::detail
