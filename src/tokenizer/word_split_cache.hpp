// The token ids of words already split, so that a word seen again costs one hash lookup and
// a copy instead of a run of merges. Text is mostly repeats (tinyshakespeare: 262 k words, 15 k
// distinct), so encoding spends its time here. Internal to the library.
//
// Open addressing with linear probing over a power-of-two array of 4-byte slots; each slot
// points into an arena of fixed-size chunks holding, per word, its length, its number of ids,
// its bytes and its ids (2 bytes each when every id fits, else 4). tinyshakespeare's 15 k
// words take about 0.35 MiB (4096-token vocabulary), and growing never copies the arena. It
// holds at most max_words words, the first ones met (the frequent words come early), and at
// most kMaxArenaBytes of them: past either, other words are split every time, and memory
// stays bounded.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
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
  // Every id the cache will be given is < id_limit.
  WordSplitCache(size_t max_words, int64_t id_limit)
      : max_words_(max_words), id_bytes_(id_limit <= 65536 ? 2 : 4), slots_(kFirstSlots, kEmpty) {}

  // Appends the ids of `word` (never empty) to out: from the cache, or from split(word, out),
  // which must append them, remembered while there is room.
  template <typename Split>
  void append(std::string_view word, std::vector<int64_t>& out, Split&& split) {
    const uint64_t h = hash_word(word);
    const uint32_t tag = tag_of(h);
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (; slots_[i] != kEmpty; i = (i + 1) & mask) {
      if ((slots_[i] >> kOffsetBits) != tag) continue;
      const unsigned char* entry = entry_at(slots_[i]);
      if (entry[0] == word.size() && same_bytes(entry + 2, word)) {
        const unsigned char* ids = entry + 2 + word.size();
        for (size_t k = 0; k < entry[1]; ++k) out.push_back(load_id(ids + id_bytes_ * k));
        return;
      }
    }
    const size_t first = out.size();
    split(word, out);
    remember(word, h, i, std::span<const int64_t>(out.data() + first, out.size() - first));
  }

  size_t size() const { return count_; }
  // Bytes held: the slots and the arena's chunks.
  size_t bytes() const { return slots_.size() * sizeof(Slot) + chunks_.size() * kChunkBytes; }

  static constexpr size_t kMaxArenaBytes = (size_t{1} << 22) - 1;

 private:
  // A slot: kEmpty, or 10 bits of the word's hash (to skip most mismatches without touching
  // the arena) above 22 bits of its entry's offset in the arena plus one.
  using Slot = uint32_t;
  static constexpr Slot kEmpty = 0;
  static constexpr unsigned kOffsetBits = 22;
  static constexpr size_t kFirstSlots = 1024;
  static constexpr size_t kChunkBytes = size_t{1} << 14;
  static constexpr size_t kMaxField = std::numeric_limits<uint8_t>::max();
  static constexpr size_t kNoRoom = std::numeric_limits<size_t>::max();
  // An entry: word length, id count (a byte each), the word's bytes, its ids.
  static constexpr size_t kMaxEntryBytes = 2 + kMaxField + 4 * kMaxField;
  static_assert(kMaxEntryBytes <= kChunkBytes, "an entry must fit in one chunk");

  static uint32_t tag_of(uint64_t h) {
    return static_cast<uint32_t>(h >> (64 - (32 - kOffsetBits)));
  }

  const unsigned char* entry_at(Slot slot) const {
    const size_t at = (slot & ((Slot{1} << kOffsetBits) - 1)) - 1;
    return chunks_[at / kChunkBytes].get() + at % kChunkBytes;
  }

  // A loop, not memcmp: words are a few bytes, shorter than the call.
  static bool same_bytes(const unsigned char* stored, std::string_view word) {
    for (size_t k = 0; k < word.size(); ++k) {
      if (stored[k] != static_cast<unsigned char>(word[k])) return false;
    }
    return true;
  }
  int64_t load_id(const unsigned char* at) const {
    if (id_bytes_ == 2) return at[0] | (at[1] << 8);
    uint32_t id = 0;
    std::memcpy(&id, at, sizeof id);  // unaligned: ids follow words of any length
    return id;
  }
  void store_id(unsigned char* at, int64_t id) const {
    const auto id32 = static_cast<uint32_t>(id);
    if (id_bytes_ == 2) {
      at[0] = static_cast<unsigned char>(id32);
      at[1] = static_cast<unsigned char>(id32 >> 8);
      return;
    }
    std::memcpy(at, &id32, sizeof id32);
  }

  // Stores the split of word (hash h; empty slot `at`) if it fits.
  void remember(std::string_view word, uint64_t h, size_t at, std::span<const int64_t> ids) {
    if (count_ >= max_words_ || word.size() > kMaxField || ids.size() > kMaxField) return;
    const size_t offset = place_entry(2 + word.size() + id_bytes_ * ids.size());
    if (offset == kNoRoom) return;
    if (4 * (count_ + 1) > 3 * slots_.size()) {  // at most 3/4 full
      grow();
      at = h & (slots_.size() - 1);
      while (slots_[at] != kEmpty) at = (at + 1) & (slots_.size() - 1);
    }
    slots_[at] = (tag_of(h) << kOffsetBits) | static_cast<Slot>(offset + 1);
    unsigned char* entry = chunks_[offset / kChunkBytes].get() + offset % kChunkBytes;
    entry[0] = static_cast<unsigned char>(word.size());
    entry[1] = static_cast<unsigned char>(ids.size());
    std::memcpy(entry + 2, word.data(), word.size());
    for (size_t k = 0; k < ids.size(); ++k)
      store_id(entry + 2 + word.size() + id_bytes_ * k, ids[k]);
    ++count_;
  }

  // The arena offset of a new entry of `size` bytes (<= kChunkBytes), or kNoRoom when the
  // arena is at its limit. An entry that would straddle two chunks starts the next one.
  size_t place_entry(size_t size) {
    size_t offset = used_;
    if (offset / kChunkBytes != (offset + size - 1) / kChunkBytes)
      offset = (offset / kChunkBytes + 1) * kChunkBytes;
    if (offset + size > kMaxArenaBytes) return kNoRoom;
    if (chunks_.size() * kChunkBytes < offset + size) {
      chunks_.push_back(std::make_unique_for_overwrite<unsigned char[]>(kChunkBytes));
    }
    used_ = offset + size;
    return offset;
  }

  // Twice the slots; each word's place is found again from its bytes.
  void grow() {
    std::vector<Slot> old(slots_.size() * 2, kEmpty);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot s : old) {
      if (s == kEmpty) continue;
      const unsigned char* entry = entry_at(s);
      const std::string_view word(reinterpret_cast<const char*>(entry + 2), entry[0]);
      size_t i = hash_word(word) & mask;
      while (slots_[i] != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  size_t max_words_;
  size_t id_bytes_;  // 2 when every id is < 65536, else 4
  size_t count_ = 0;
  size_t used_ = 0;  // the arena's end: entries are below it
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<unsigned char[]>> chunks_;  // the arena
};

}  // namespace attn::detail
