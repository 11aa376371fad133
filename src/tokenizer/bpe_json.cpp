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
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"

namespace attn {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "attn-bpe";
constexpr int64_t kVersion = 1;
constexpr uintmax_t kMaxFileBytes = uintmax_t{1} << 30;

const json& field(const json& j, const char* name) {
  ATTN_CHECK(j.contains(name), "missing field \"", name, "\"");
  return j.at(name);
}

int64_t integer(const json& j, const char* what, int64_t lo, int64_t hi) {
  ATTN_CHECK(j.is_number_integer(), what, " must be an integer");
  ATTN_CHECK(!j.is_number_unsigned() || j.get<uint64_t>() <= static_cast<uint64_t>(hi), what,
             " is out of range [", lo, ", ", hi, "]");
  const auto v = j.get<int64_t>();
  ATTN_CHECK(v >= lo && v <= hi, what, " (", v, ") is out of range [", lo, ", ", hi, "]");
  return v;
}

std::vector<std::string> strings(const json& j, const char* what) {
  ATTN_CHECK(j.is_array(), what, " must be an array of strings");
  std::vector<std::string> out;
  for (const json& e : j) {
    ATTN_CHECK(e.is_string(), what, " must hold strings only");
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

std::string BpeTokenizer::to_json() const {
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
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
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(detail::concat("not a JSON document (", e.what(), ")"));
  }
  try {
    ATTN_CHECK(j.is_object(), "the document must be a JSON object");
    ATTN_CHECK(field(j, "format").is_string() && field(j, "format").get<std::string>() == kFormat,
               "\"format\" must be \"", kFormat, "\"");
    const int64_t version = integer(field(j, "version"), "\"version\"", 0, 1 << 30);
    ATTN_CHECK(version == kVersion, "unsupported version ", version, " (this build reads ", kVersion, ")");
    BpeOptions options;
    ATTN_CHECK(field(j, "byte_level").is_boolean(), "\"byte_level\" must be true or false");
    options.byte_level = field(j, "byte_level").get<bool>();
    options.vocab_size = integer(field(j, "vocab_size"), "\"vocab_size\"", 1, detail::kMaxVocab);
    options.min_frequency = integer(field(j, "min_frequency"), "\"min_frequency\"", 1,
                                    std::numeric_limits<int64_t>::max());
    options.special_tokens = strings(field(j, "special_tokens"), "\"special_tokens\"");
    for (const std::string& s : options.special_tokens) {
      ATTN_CHECK(detail::is_utf8(s), "special token \"", s, "\" is not UTF-8 text");
    }
    std::vector<std::string> alphabet;
    if (!options.byte_level) {
      alphabet = strings(field(j, "alphabet"), "\"alphabet\"");
      ATTN_CHECK(static_cast<int64_t>(alphabet.size()) <= detail::kMaxVocab, "the alphabet is too large");
      for (const std::string& c : alphabet) {
        ATTN_CHECK(!c.empty() && detail::is_utf8(c) && detail::utf8_length(c, 0) == c.size(),
                   "alphabet entry \"", c, "\" is not one UTF-8 character");
      }
      ATTN_CHECK(std::find(options.special_tokens.begin(), options.special_tokens.end(), "<unk>") !=
                     options.special_tokens.end(),
                 "a character-mode tokenizer must list \"<unk>\" among its special tokens");
    }
    BpeTokenizer t = with_base(options, alphabet);  // checks duplicates

    const json& merges = field(j, "merges");
    ATTN_CHECK(merges.is_array(), "\"merges\" must be an array of [left, right] id pairs");
    ATTN_CHECK(static_cast<int64_t>(merges.size()) <= detail::kMaxVocab - t.vocab_size(),
               "too many merges (", merges.size(), ")");
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& m = merges[i];
      ATTN_CHECK(m.is_array() && m.size() == 2, "merge ", i, " must be a [left, right] id pair");
      const std::string what = detail::concat("merge ", i, "'s ids");
      // Built from base tokens or earlier merges only: never a special, never itself or later.
      const int64_t left = integer(m[0], what.c_str(), t.first_base_id_, t.vocab_size() - 1);
      const int64_t right = integer(m[1], what.c_str(), t.first_base_id_, t.vocab_size() - 1);
      ATTN_CHECK(!t.merge_rank_.contains((static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right)),
                 "merge ", i, " repeats an earlier merge (", left, ", ", right, ")");
      t.add_merge(left, right);
    }
    const std::vector<std::string> vocab = strings(field(j, "vocab"), "\"vocab\"");
    ATTN_CHECK(static_cast<int64_t>(vocab.size()) == t.vocab_size(), "\"vocab\" lists ",
               vocab.size(), " tokens, the specials, alphabet and merges make ", t.vocab_size());
    for (int64_t id = 0; id < t.vocab_size(); ++id) {
      std::string bytes = vocab[static_cast<size_t>(id)];
      if (options.byte_level && id >= t.first_base_id_) {
        ATTN_CHECK(detail::parse_byte_display(vocab[static_cast<size_t>(id)], bytes), "vocab entry ",
                   id, " is not in byte form");
      }
      ATTN_CHECK(bytes == t.tokens_[static_cast<size_t>(id)], "vocab entry ", id,
                 " disagrees with the merges");
    }
    return t;
  } catch (const json::exception& e) {
    throw Error(e.what());
  }
}

void BpeTokenizer::save(const std::string& path) const {
  const std::string text = to_json();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    ATTN_CHECK(out.good(), "bpe: cannot write ", temporary);
    out << text;
    out.flush();
    ATTN_CHECK(out.good(), "bpe: writing ", temporary, " failed");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary);
    throw Error(detail::concat("bpe: cannot rename ", temporary, " to ", path, ": ", ec.message()));
  }
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  ATTN_CHECK(!ec, "bpe: cannot read ", path, ": ", ec.message());
  ATTN_CHECK(size <= kMaxFileBytes, "bpe: ", path, " is ", size, " bytes, more than a tokenizer file may be");
  std::ifstream in(path, std::ios::binary);
  ATTN_CHECK(in.good(), "bpe: cannot open ", path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str());
  } catch (const Error& e) {
    throw Error(detail::concat("bpe: ", path, ": ", e.what()));
  }
}

}  // namespace attn
