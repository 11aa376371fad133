// The token ids of words already split, so that a word seen again costs one hash lookup and
// a copy instead of a run of merges. Text is mostly repeats (tinyshakespeare: 262 k words, 15 k
// distinct), so encoding spends its time here. Internal to the library.
//
// Open addressing with linear probing over a power-of-two array of 8-byte slots; the words'
// bytes and their ids live in one arena, so a cache of 15 k words is about half a MiB and a
// handful of allocations. It holds at most max_words words, the first ones met (the frequent
// words come early): past that, other words are split every time, and memory stays bounded.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn::detail {

// FNV-1a: words are a few bytes long, where a simple byte loop is as fast as any.
inline uint64_t hash_word(std::string_view word) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : word) h = (h ^ c) * 1099511628211ull;
  return h ^ (h >> 29);
}

class alignas(64) WordSplitCache {  // its own cache lines: one per thread
 public:
  explicit WordSplitCache(size_t max_words) : max_words_(max_words) { slots_.resize(kFirstSlots); }

  // Appends the ids of `word` (never empty) to out: from the cache, or from split(word, out),
  // which must append them, remembered while there is room.
  template <typename Split>
  void append(std::string_view word, std::vector<int64_t>& out, Split&& split) {
    const uint64_t h = hash_word(word);
    const auto tag = static_cast<uint16_t>(h >> 48);
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (; slots_[i].word_length != 0; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.tag == tag && s.word_length == word.size() && same_bytes(arena_.data() + s.at, word)) {
        const char* ids = arena_.data() + s.at + s.word_length;
        for (size_t k = 0; k < s.id_count; ++k) out.push_back(load_id(ids + 4 * k));
        return;
      }
    }
    const size_t first = out.size();
    split(word, out);
    remember(word, h, i, std::span<const int64_t>(out.data() + first, out.size() - first));
  }

  size_t size() const { return count_; }

 private:
  // 8 bytes: the entry's offset in arena_ (its word's bytes, then its ids as 4-byte integers),
  // 16 bits of the hash to skip most mismatches, the word's length and its number of ids.
  struct Slot {
    uint32_t at = 0;
    uint16_t tag = 0;
    uint8_t word_length = 0;  // 0: an empty slot
    uint8_t id_count = 0;
  };
  static constexpr size_t kFirstSlots = 1024;
  static constexpr size_t kMaxField = std::numeric_limits<uint8_t>::max();
  static constexpr size_t kMaxArena = std::numeric_limits<uint32_t>::max();

  // A loop, not memcmp: words are a few bytes, shorter than the call.
  static bool same_bytes(const char* stored, std::string_view word) {
    for (size_t k = 0; k < word.size(); ++k) {
      if (stored[k] != word[k]) return false;
    }
    return true;
  }
  static int64_t load_id(const char* at) {
    uint32_t id = 0;
    std::memcpy(&id, at, sizeof id);  // unaligned: ids follow words of any length
    return id;
  }

  // Stores the split of word (hash h; empty slot `at`) if it fits.
  void remember(std::string_view word, uint64_t h, size_t at, std::span<const int64_t> ids) {
    const size_t entry_bytes = word.size() + 4 * ids.size();
    if (count_ >= max_words_ || word.size() > kMaxField || ids.size() > kMaxField ||
        arena_.size() + entry_bytes > kMaxArena) {
      return;
    }
    if (4 * (count_ + 1) > 3 * slots_.size()) {  // at most 3/4 full
      grow();
      at = h & (slots_.size() - 1);
      while (slots_[at].word_length != 0) at = (at + 1) & (slots_.size() - 1);
    }
    slots_[at] = {static_cast<uint32_t>(arena_.size()), static_cast<uint16_t>(h >> 48),
                  static_cast<uint8_t>(word.size()), static_cast<uint8_t>(ids.size())};
    arena_.append(word);
    for (int64_t id : ids) {
      const auto id32 = static_cast<uint32_t>(id);  // ids < 2^24
      arena_.append(reinterpret_cast<const char*>(&id32), sizeof id32);
    }
    ++count_;
  }

  // Twice the slots; each word's place is found again from its bytes.
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.word_length == 0) continue;
      size_t i = hash_word(std::string_view(arena_.data() + s.at, s.word_length)) & mask;
      while (slots_[i].word_length != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  size_t max_words_;
  size_t count_ = 0;
  std::vector<Slot> slots_;
  std::string arena_;  // per cached word: its bytes, then its ids
};

}  // namespace attn::detail
