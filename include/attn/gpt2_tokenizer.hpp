// GPT-2's tokenizer, from the files people have: OpenAI's encoder.json + vocab.bpe, Hugging
// Face's vocab.json + merges.txt (the same data) or a byte-level-BPE tokenizer.json. The ids are
// GPT-2's own, identical to the reference implementations' (tests/fixtures/gpt2/ holds ids
// on which tiktoken and transformers' GPT2TokenizerFast agree, for text of many scripts).
//
// Encoding: special tokens (<|endoftext|>, and a tokenizer.json's other added tokens) become
// their ids whole; the text between them is cut by GPT-2's pre-tokenizer pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Unicode categories as tiktoken's regular expressions have them); each piece's UTF-8 bytes
// are GPT-2's 256 byte tokens, merged by rank. Any bytes encode and decode back exactly; a byte
// that does not start a valid UTF-8 sequence counts as one character that is neither a letter,
// a number nor a space (the oracles take only Unicode text, so they have no answer there).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

namespace detail {
class WordSplitCache;  // src/tokenizer/word_split_cache.hpp
class PairRanks;       // src/tokenizer/pair_ranks.hpp
}  // namespace detail

class Gpt2TokenizerBuilder;  // src/tokenizer/gpt2_tokenizer.cpp

class Gpt2Tokenizer {
 public:
  // A directory holding tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe
  // (the first found, in that order), or the path of a tokenizer.json or of one of the vocab
  // files (its partner is looked for beside it). attn::Error naming the file for anything else.
  static Gpt2Tokenizer load(const std::string& path);
  // The files load(path) reads: {tokenizer.json} or {vocabulary, merges}; the same error for a
  // path that holds none of them.
  static std::vector<std::string> files(const std::string& path);
  // From the texts of a vocabulary (encoder.json / vocab.json: token -> id, tokens spelt in
  // GPT-2's byte alphabet) and of the merges (vocab.bpe / merges.txt: "#version" then "a b").
  static Gpt2Tokenizer from_vocab_and_merges(std::string_view vocab_json,
                                             std::string_view merges_text);
  // From a Hugging Face tokenizer.json with a BPE model (its merges as "a b" or ["a", "b"]) and
  // its added tokens. The pieces are GPT-2's, except for the pre-tokenizer that
  // BpeTokenizer::to_hf_json writes (attn export): then they are attn's split_words, and the
  // ids those of the BpeTokenizer written. Any other pre-tokenizer is an attn::Error (an
  // absent one counts as GPT-2's).
  static Gpt2Tokenizer from_tokenizer_json(std::string_view json);

  std::vector<int64_t> encode(std::string_view text) const;
  // One long text on the library's threads: cut into a part per thread where a line starts
  // after a single newline (where encoding a part ends as encoding the whole text does there),
  // the parts encoded side by side. The ids equal encode(text).
  std::vector<int64_t> encode_parallel(std::string_view text) const;
  // Each text on the library's threads; ids[i] == encode(texts[i]). The texts are dealt out in
  // runs of about equal bytes, one run per thread, and each run shares one word-split cache (a
  // word seen in any earlier text of the run costs a lookup), so many short texts encode about
  // as fast as one long one.
  std::vector<std::vector<int64_t>> encode_batch(const std::vector<std::string>& texts) const;
  // The bytes of the tokens; attn::Error for an id outside the vocabulary.
  std::string decode(std::span<const int64_t> ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  // A token as the vocabulary file spells it ("Ġthe" for " the").
  const std::string& display(int64_t id) const;
  // The id of a special token such as "<|endoftext|>"; nothing when there is none (as
  // BpeTokenizer::token_to_id).
  std::optional<int64_t> special_id(std::string_view token) const;
  // What generation starts from when given no prompt: <|endoftext|>, after which GPT-2 was
  // trained to begin a text (a newline's ids for a vocabulary without it).
  std::vector<int64_t> default_prompt() const;

  // A copy has a merge table of its own; a moved-from tokenizer may only be assigned to or
  // destroyed.
  Gpt2Tokenizer(const Gpt2Tokenizer& other);
  Gpt2Tokenizer& operator=(const Gpt2Tokenizer& other);
  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;
  ~Gpt2Tokenizer();

 private:
  friend class Gpt2TokenizerBuilder;
  Gpt2Tokenizer();
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const;
  // encode(text) appended to ids, through the caller's cache of words already split.
  void encode_into(std::string_view text, detail::WordSplitCache& cache,
                   std::vector<int64_t>& ids) const;

  std::vector<std::string> tokens_;  // by id: as spelt in the vocabulary ("" for a gap)
  std::vector<std::string> bytes_;   // by id: the bytes the token stands for
  int64_t byte_ids_[256] = {};       // the token of each byte
  std::vector<std::pair<int64_t, int64_t>> merges_;  // by rank: the pair merged
  std::vector<int64_t> merged_ids_;                  // by rank: the token it makes
  std::unique_ptr<detail::PairRanks> merge_rank_;
  std::vector<std::string> specials_;  // split off before the pattern runs
  std::vector<int64_t> special_ids_;
  bool attn_words_ = false;  // split_words instead of GPT-2's pattern
};

}  // namespace attn
