// From text to token ids: a byte-pair-encoding tokenizer trained on a corpus, and a
// one-token-per-character tokenizer for character-level models.
//
// Words. Text is first cut into words, and merges never cross a word: a word is a run of
// whitespace (possibly empty) followed by one run of letters (ASCII letters and every byte
// ≥ 0x80, so a UTF-8 character is never cut), of digits, or of other symbols; whitespace at
// the very end is a word of its own. So the whitespace before a word travels with it — the
// tokens " the" and "\n\nFirst" exist — and decode(encode(text)) gives back every byte,
// runs of spaces and newlines included.
//
// Ids: the special tokens first (in the order given; in character mode "<unk>" is added
// when absent), then the base alphabet — the 256 bytes (byte_level), or the distinct
// characters of the corpus sorted by code point — then one id per merge, in the order learnt.
//
// Training merges, one at a time, the adjacent pair of tokens that occurs most often in the
// corpus's words (each word weighted by its count); ties go to the pair whose left token has
// the smaller id, then the right. It stops at vocab_size tokens, or when no pair occurs
// min_frequency times. Deterministic: the same corpus and options give the same tokenizer on
// every machine and thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "attn/gpt2_tokenizer.hpp"

namespace attn {

namespace detail {
class WordSplitCache;
class TokenIndex;  // src/tokenizer/token_index.hpp
class PairRanks;   // src/tokenizer/pair_ranks.hpp
}  // namespace detail

// Calls emit(word) for each word of text, in order (see the header comment); the words
// concatenate back to text.
void split_words(std::string_view text, const std::function<void(std::string_view)>& emit);

struct BpeOptions {
  int64_t vocab_size = 512;   // specials + base alphabet + merges, at most
  int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  bool byte_level = false;    // base alphabet: the 256 bytes (nothing is ever unknown)
  std::vector<std::string> special_tokens;  // never split, never merged, e.g. "<|endoftext|>"
};

class BpeTokenizer {
 public:
  // merges_done of merges_total (= vocab_size − base), called now and then while training.
  using Progress = std::function<void(int64_t merges_done, int64_t merges_total)>;

  // Learns the merges from corpus. Throws attn::Error for a vocab_size smaller than the
  // specials and the base alphabet, min_frequency < 1, or an empty special token.
  static BpeTokenizer train(std::string_view corpus, const BpeOptions& options,
                            const Progress& progress = {});

  // Ids of text. Special tokens found in text become their ids whole. In character mode a
  // character the corpus never had becomes "<unk>" (so that text does not round-trip); in
  // byte mode that cannot happen. The split of each distinct word is computed once per call.
  std::vector<int64_t> encode(std::string_view text) const;
  // Each text on its own, spread over the library's threads.
  std::vector<std::vector<int64_t>> encode_batch(const std::vector<std::string>& texts) const;
  // Encodes one long text using the threads (a BpeStreamEncoder fed the whole text): the ids
  // equal encode(text).
  std::vector<int64_t> encode_parallel(std::string_view text) const;
  // The bytes of the tokens, concatenated. Throws attn::Error for an id out of range.
  std::string decode(std::span<const int64_t> ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  // The exact bytes of token `id` (throws for an id out of range).
  const std::string& id_to_token(int64_t id) const;
  // The id of the token with exactly these bytes, if there is one.
  std::optional<int64_t> token_to_id(std::string_view token) const;
  // A token made visible for people: byte mode writes each byte as GPT-2 does (a space is
  // "Ġ", a newline "Ċ"); character mode shows a space as "▁" and a newline as "↵".
  std::string display(int64_t id) const;

  const BpeOptions& options() const { return options_; }
  // The merges in the order learnt: merge i made id first_merge_id() + i from (left, right).
  const std::vector<std::pair<int64_t, int64_t>>& merges() const { return merges_; }
  int64_t first_merge_id() const { return first_merge_id_; }
  int64_t unk_id() const { return unk_id_; }  // −1 in byte mode

  // A JSON file (format "attn-bpe", version 1; docs/library.md): the options, the alphabet
  // (character mode), the merges as id pairs in order, and every token in display form.
  // Written to a temporary file, then renamed over `path`.
  void save(const std::string& path) const;
  // Reads and checks such a file: the format and version, every id in range, each merge
  // built from earlier tokens, the vocabulary consistent with the merges, no duplicates.
  // A broken file gives attn::Error naming the problem.
  static BpeTokenizer load(const std::string& path);
  static BpeTokenizer from_json(std::string_view json);
  std::string to_json() const;
  // Hugging Face's tokenizer.json (byte-level only; attn::Error in character mode): the BPE
  // model, the special tokens as added tokens, attn's word split as a Split pre-tokenizer.
  // Gpt2Tokenizer::from_tokenizer_json reads it back with the same ids.
  std::string to_hf_json() const;

  // A copy has lookup tables of its own; a moved-from tokenizer may only be assigned to or
  // destroyed.
  BpeTokenizer(const BpeTokenizer& other);
  BpeTokenizer& operator=(const BpeTokenizer& other);
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

 private:
  BpeTokenizer();
  // The specials (and "<unk>" in character mode) and the base alphabet, no merges yet.
  static BpeTokenizer with_base(const BpeOptions& options,
                                const std::vector<std::string>& alphabet);

  friend class BpeStreamEncoder;

  void add_token(std::string bytes);
  void add_merge(int64_t left, int64_t right);
  void encode_word(std::string_view word, std::vector<int64_t>& out) const;
  // Appends the ids of text to out, splitting each word through the cache.
  void encode_with(std::string_view text, detail::WordSplitCache& cache,
                   std::vector<int64_t>& out) const;

  BpeOptions options_;
  std::vector<std::string> tokens_;                    // id -> bytes
  std::unique_ptr<detail::TokenIndex> ids_;            // bytes -> id (the first one)
  std::vector<std::pair<int64_t, int64_t>> merges_;    // in order
  std::unique_ptr<detail::PairRanks> merge_rank_;      // (left, right) -> merge index
  std::unordered_map<std::string, int64_t> base_ids_;  // character mode: character -> id
  int64_t first_base_id_ = 0;
  int64_t first_merge_id_ = 0;
  int64_t unk_id_ = -1;
};

// Encodes text that arrives in parts — a file larger than memory, a pipe — with bounded
// memory: write() bytes as they come, finish() at the end; emit(ids) receives the ids in
// order, in spans, as soon as the words they belong to are known to be complete. All the ids
// emitted equal tokenizer.encode(the concatenated text), however the text was cut into writes.
//
// Text is gathered into blocks of about block_bytes per thread, each block cut where a word
// starts (never inside a special token) and its parts encoded on the library's threads, each
// part with its own cache of word splits kept from block to block (at most cache_words words
// each). Memory: a block of text, its ids, and the caches. A text with no place to cut (no
// whitespace after a word) is held until it has one or ends. The tokenizer must outlive the
// encoder.
class BpeStreamEncoder {
 public:
  using Emit = std::function<void(std::span<const int64_t> ids)>;
  static constexpr size_t kDefaultBlockBytes = size_t{1} << 13;
  static constexpr size_t kDefaultCacheWords = size_t{1} << 15;

  BpeStreamEncoder(const BpeTokenizer& tokenizer, Emit emit,
                   size_t block_bytes = kDefaultBlockBytes,
                   size_t cache_words = kDefaultCacheWords);
  ~BpeStreamEncoder();
  BpeStreamEncoder(const BpeStreamEncoder&) = delete;
  BpeStreamEncoder& operator=(const BpeStreamEncoder&) = delete;

  // The next bytes of the text; may emit the ids of complete words.
  void write(std::string_view bytes);
  // The text has ended: emits the ids of what is held back. The encoder may then start on a
  // new text (the caches are kept).
  void finish();

 private:
  // Encodes the longest prefix of text that can be cut off (all of it at the end of the text)
  // and returns its length.
  size_t consume(std::string_view text, bool at_end);
  void encode_block(std::string_view block);

  const BpeTokenizer& tokenizer_;
  Emit emit_;
  size_t block_bytes_, cache_words_;
  std::string pending_;  // text written but not yet encoded
  size_t uncut_ = 0;     // pending_ had no cut at this size: wait for twice as much
  // One per part of a block; each on its own cache lines, since two threads append to them.
  struct alignas(64) Part {
    std::unique_ptr<detail::WordSplitCache> cache;
    std::vector<int64_t> ids;
  };
  std::vector<Part> parts_;
};

// One token per distinct character (UTF-8 code point) of the corpus, ids by code point: the
// tokenizer of character-level language models. Encoding a character the corpus did not
// have throws attn::Error naming it.
class CharTokenizer {
 public:
  static CharTokenizer train(std::string_view corpus);
  // The characters, in id order (each a UTF-8 string).
  static CharTokenizer from_characters(std::vector<std::string> characters);

  std::vector<int64_t> encode(std::string_view text) const;
  std::string decode(std::span<const int64_t> ids) const;
  int64_t vocab_size() const { return static_cast<int64_t>(characters_.size()); }
  const std::vector<std::string>& characters() const { return characters_; }

 private:
  std::vector<std::string> characters_;
  std::unordered_map<std::string, int64_t> ids_;
};

// Every tokenizer of attn behind one interface — characters, attn's BPE, GPT-2's — as a
// value: what a GPT checkpoint stores, `attn train` and `attn generate` use, and Python's
// attn.Gpt holds (the set is closed, so a variant rather than virtual functions: a Tokenizer
// copies, moves and compares like the tokenizer it holds). JSON: the BPE file format
// ("attn-bpe"), or {"format": "attn-char", "version": 1, "characters": [...]} for a
// CharTokenizer; GPT-2's is kept in Hugging Face's files (Gpt2Tokenizer::load), not here.
class Tokenizer {
 public:
  Tokenizer(CharTokenizer t) : impl_(std::move(t)) {}  // NOLINT: implicit by design
  Tokenizer(BpeTokenizer t) : impl_(std::move(t)) {}   // NOLINT
  Tokenizer(Gpt2Tokenizer t) : impl_(std::move(t)) {}  // NOLINT
  std::vector<int64_t> encode(std::string_view text) const;
  std::string decode(std::span<const int64_t> ids) const;
  // Token `id` made visible, as BpeTokenizer::display shows it (characters: a space as "▁",
  // a newline as "↵"). attn::Error for an id out of range.
  std::string display(int64_t id) const;
  int64_t vocab_size() const;
  // What generation starts from when given no prompt: a newline, or the first token when the
  // vocabulary cannot spell one (a corpus without newlines); GPT-2's <|endoftext|>.
  std::vector<int64_t> default_prompt() const;
  std::string kind() const;  // "char", "bpe" or "gpt2"
  const BpeTokenizer* bpe() const { return std::get_if<BpeTokenizer>(&impl_); }  // else null
  const Gpt2Tokenizer* gpt2() const { return std::get_if<Gpt2Tokenizer>(&impl_); }
  // attn::Error for GPT-2's, which lives in Hugging Face's files.
  std::string to_json() const;
  // Dispatches on "format"; attn::Error for anything else or a broken file.
  static Tokenizer from_json(std::string_view json);

 private:
  std::variant<CharTokenizer, BpeTokenizer, Gpt2Tokenizer> impl_;
};

}  // namespace attn
