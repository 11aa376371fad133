// The tokenizer file: JSON, written whole to a temporary file and renamed into place, and
// read back with every field checked (a broken file is an attn::Error, never a crash).
//
//   {"format": "attn-bpe", "version": 1,
//    "byte_level": true, "vocab_size": 4096, "min_frequency": 2,   <- the training options
//    "special_tokens": ["<|endoftext|>"],                          <- ids 0, 1, …
//    "alphabet": ["\n", " ", "!", …],    <- character mode only: the base characters in id order
//    "merges": [[72, 101], …],           <- merge i makes id first_merge_id + i from two ids
//    "vocab": ["<|endoftext|>", "Ā", …]} <- every token in id order: specials and character-mode
//                                            tokens as text, byte-level tokens in GPT-2's
//                                            byte-to-character form (a space is "Ġ")
// "vocab" is redundant — the merges define it — and is checked against them on loading, so a
// file edited by hand cannot silently disagree with itself.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/bpe_file_reader.hpp"
#include "src/tokenizer/pair_ranks.hpp"
#include "src/tokenizer/text.hpp"

namespace attn {
namespace {

using nlohmann::json;

constexpr const char* kBpeFormat = "attn-bpe";
constexpr int64_t kBpeVersion = 1;

using detail::JsonField;
using detail::JsonNumber;
using detail::JsonType;

const JsonField& field(const detail::BpeFileReader& file, const char* name) {
  const JsonField* f = file.field(name);
  ATTN_CHECK(f != nullptr, "missing field \"", name, "\"");
  return *f;
}

// The number's value in [lo, hi].
int64_t integer(const JsonNumber& n, const char* what, int64_t lo, int64_t hi) {
  ATTN_CHECK(n.type == JsonType::kInteger || n.type == JsonType::kUnsigned, what,
             " must be an integer");
  ATTN_CHECK(!n.too_large, what, " is out of range [", lo, ", ", hi, "]");
  ATTN_CHECK(n.value >= lo && n.value <= hi, what, " (", n.value, ") is out of range [", lo, ", ",
             hi, "]");
  return n.value;
}

int64_t integer(const JsonField& f, const char* what, int64_t lo, int64_t hi) {
  return integer(f.number, what, lo, hi);
}

// One id of merge i. Its message ("merge 17's ids") is formatted only on failure: formatting
// one for each of thousands of merges took half of the loading time.
int64_t merge_id(const JsonNumber& n, size_t i, int64_t lo, int64_t hi) {
  if ((n.type == JsonType::kInteger || n.type == JsonType::kUnsigned) && !n.too_large &&
      n.value >= lo && n.value <= hi) {
    return n.value;
  }
  return integer(n, detail::concat("merge ", i, "'s ids").c_str(), lo, hi);  // throws
}

const std::vector<std::string>& strings(const JsonField& f, const char* what) {
  ATTN_CHECK(f.type == JsonType::kArray, what, " must be an array of strings");
  ATTN_CHECK(f.only_strings, what, " must hold strings only");
  return f.strings;
}

}  // namespace

std::string BpeTokenizer::to_json() const {
  json j;
  j["format"] = kBpeFormat;
  j["version"] = kBpeVersion;
  j["byte_level"] = options_.byte_level;
  j["vocab_size"] = options_.vocab_size;
  j["min_frequency"] = options_.min_frequency;
  j["special_tokens"] = options_.special_tokens;
  if (!options_.byte_level) {
    j["alphabet"] = std::vector<std::string>(tokens_.begin() + first_base_id_,
                                             tokens_.begin() + first_merge_id_);
  }
  json merges = json::array();
  for (const auto& [left, right] : merges_) merges.push_back({left, right});
  j["merges"] = std::move(merges);
  json vocab = json::array();
  for (int64_t id = 0; id < vocab_size(); ++id) {
    if (options_.byte_level && id >= first_base_id_) {
      std::string shown;
      for (unsigned char b : tokens_[static_cast<size_t>(id)]) shown += detail::byte_display(b);
      vocab.push_back(shown);
    } else {
      vocab.push_back(tokens_[static_cast<size_t>(id)]);
    }
  }
  j["vocab"] = std::move(vocab);
  return j.dump(1);
}

BpeTokenizer BpeTokenizer::from_json(std::string_view text) {
  detail::BpeFileReader file;
  bool well_formed = false;
  try {
    well_formed = file.read(text);
  } catch (const json::exception& e) {  // the parser reports through parse_error; in case it throws
    throw Error(detail::concat("not a JSON document (", e.what(), ")"));
  }
  ATTN_CHECK(!file.over_limit(), file.error());
  ATTN_CHECK(well_formed, "not a JSON document (", file.error(), ")");
  ATTN_CHECK(file.root_is_object(), "the document must be a JSON object");
  const JsonField& format = field(file, "format");
  ATTN_CHECK(format.type == JsonType::kString && format.text == kBpeFormat, "\"format\" must be \"",
             kBpeFormat, "\"");
  const int64_t version = integer(field(file, "version"), "\"version\"", 0, 1 << 30);
  ATTN_CHECK(version == kBpeVersion, "unsupported version ", version, " (this build reads ",
             kBpeVersion, ")");
  BpeOptions options;
  ATTN_CHECK(field(file, "byte_level").type == JsonType::kBool,
             "\"byte_level\" must be true or false");
  options.byte_level = field(file, "byte_level").boolean;
  options.vocab_size = integer(field(file, "vocab_size"), "\"vocab_size\"", 1, detail::kMaxVocab);
  options.min_frequency = integer(field(file, "min_frequency"), "\"min_frequency\"", 1,
                                  std::numeric_limits<int64_t>::max());
  options.special_tokens = strings(field(file, "special_tokens"), "\"special_tokens\"");
  for (const std::string& s : options.special_tokens) {
    ATTN_CHECK(detail::is_utf8(s), "special token \"", s, "\" is not UTF-8 text");
  }
  std::vector<std::string> alphabet;
  if (!options.byte_level) {
    alphabet = strings(field(file, "alphabet"), "\"alphabet\"");
    ATTN_CHECK(static_cast<int64_t>(alphabet.size()) <= detail::kMaxVocab,
               "the alphabet is too large");
    for (const std::string& c : alphabet) {
      ATTN_CHECK(!c.empty() && detail::is_utf8(c) && detail::utf8_length(c, 0) == c.size(),
                 "alphabet entry \"", c, "\" is not one UTF-8 character");
    }
    ATTN_CHECK(std::find(options.special_tokens.begin(), options.special_tokens.end(), "<unk>") !=
                   options.special_tokens.end(),
               "a character-mode tokenizer must list \"<unk>\" among its special tokens");
  }
  BpeTokenizer t = with_base(options, alphabet);  // checks duplicates

  const JsonField& merges = field(file, "merges");
  ATTN_CHECK(merges.type == JsonType::kArray,
             "\"merges\" must be an array of [left, right] id pairs");
  ATTN_CHECK(static_cast<int64_t>(merges.pairs.size()) <= detail::kMaxVocab - t.vocab_size(),
             "too many merges (", merges.pairs.size(), ")");
  t.tokens_.reserve(t.tokens_.size() + merges.pairs.size());
  t.merges_.reserve(merges.pairs.size());
  for (size_t i = 0; i < merges.pairs.size(); ++i) {
    const detail::JsonPair& m = merges.pairs[i];
    ATTN_CHECK(m.is_array && m.size == 2, "merge ", i, " must be a [left, right] id pair");
    // Built from base tokens or earlier merges only: never a special, never itself or later.
    const int64_t left = merge_id(m.id(0), i, t.first_base_id_, t.vocab_size() - 1);
    const int64_t right = merge_id(m.id(1), i, t.first_base_id_, t.vocab_size() - 1);
    ATTN_CHECK(!t.merge_rank_->contains(left, right), "merge ", i, " repeats an earlier merge (",
               left, ", ", right, ")");
    t.add_merge(left, right);
  }
  const std::vector<std::string>& vocab = strings(field(file, "vocab"), "\"vocab\"");
  ATTN_CHECK(static_cast<int64_t>(vocab.size()) == t.vocab_size(), "\"vocab\" lists ", vocab.size(),
             " tokens, the specials, alphabet and merges make ", t.vocab_size());
  std::string bytes;
  for (int64_t id = 0; id < t.vocab_size(); ++id) {
    const std::string& entry = vocab[static_cast<size_t>(id)];
    const bool byte_form = options.byte_level && id >= t.first_base_id_;
    if (byte_form) {
      ATTN_CHECK(detail::parse_byte_display(entry, bytes), "vocab entry ", id,
                 " is not in byte form");
    }
    ATTN_CHECK((byte_form ? bytes : entry) == t.tokens_[static_cast<size_t>(id)], "vocab entry ",
               id, " disagrees with the merges");
  }
  return t;
}

void BpeTokenizer::save(const std::string& path) const {
  try {
    write_file_atomically(path, to_json());
  } catch (const Error& e) {
    throw Error(detail::concat("bpe: ", e.what()));
  }
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::string text;
  try {
    text = read_whole_file(path, kMaxTokenizerBytes);
  } catch (const Error& e) {
    throw Error(detail::concat("bpe: ", e.what()));
  }
  try {
    return from_json(text);
  } catch (const Error& e) {
    throw Error(detail::concat("bpe: ", path, ": ", e.what()));
  }
}

}  // namespace attn
