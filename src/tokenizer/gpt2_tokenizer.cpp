// Gpt2Tokenizer: GPT-2's vocabulary and merges, its pre-tokenizer, and the shared merge loop.
#include "attn/gpt2_tokenizer.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/threads.hpp"
#include "src/tokenizer/bpe_merge.hpp"
#include "src/tokenizer/gpt2_byte_alphabet.hpp"
#include "src/tokenizer/gpt2_pretokenizer.hpp"
#include "src/tokenizer/hf_tokenizer_json.hpp"
#include "src/tokenizer/pair_ranks.hpp"
#include "src/tokenizer/text.hpp"
#include "src/tokenizer/word_split_cache.hpp"

namespace attn {
namespace {

using nlohmann::json;

// GPT-2's byte alphabet (src/tokenizer/gpt2_byte_alphabet.hpp), both ways.
struct ByteAlphabet {
  uint32_t char_of[256];
  std::unordered_map<uint32_t, unsigned char> byte_of;
  ByteAlphabet() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      char_of[b] = printable ? static_cast<uint32_t>(b) : next++;
      byte_of[char_of[b]] = static_cast<unsigned char>(b);
    }
  }
};
const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// The bytes a vocabulary token stands for; attn::Error for a character outside the alphabet.
std::string token_bytes(const std::string& token) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    const detail::Utf8Char c = detail::utf8_char_at(token, i);
    const auto it = alphabet.byte_of.find(c.code_point);
    ATTN_CHECK(it != alphabet.byte_of.end(), "GPT-2 vocabulary: token \"", detail::excerpt(token),
               "\" has a character outside GPT-2's byte alphabet");
    bytes += static_cast<char>(it->second);
    i += c.length;
  }
  return bytes;
}

// The vocabulary as read: token -> id, every id in [0, 2^24).
std::unordered_map<std::string, int64_t> vocab_of(const json& vocab) {
  ATTN_CHECK(vocab.is_object() && !vocab.empty(),
             "GPT-2 vocabulary: expected a JSON object of token -> id");
  std::unordered_map<std::string, int64_t> ids;
  std::unordered_map<int64_t, std::string> token_of;  // an id names one token only
  for (const auto& [token, id] : vocab.items()) {
    ATTN_CHECK(
        id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < detail::kMaxVocab,
        "GPT-2 vocabulary: the id of \"", detail::excerpt(token),
        "\" must be an integer in [0, 2^24)");
    const auto [other, fresh] = token_of.emplace(id.get<int64_t>(), token);
    ATTN_CHECK(fresh, "GPT-2 vocabulary: \"", detail::excerpt(other->second), "\" and \"",
               detail::excerpt(token), "\" have the same id ", id.get<int64_t>());
    ids[token] = id.get<int64_t>();
  }
  return ids;
}

// The merge lines of vocab.bpe / merges.txt: an optional "#version" line, then "a b" per line.
std::vector<std::pair<std::string, std::string>> merges_of_text(std::string_view text) {
  // Counted first, so a file of 20 million lines is refused before a string is built.
  const auto lines = std::count(text.begin(), text.end(), '\n');
  ATTN_CHECK(lines <= detail::kMaxVocab + 1, "GPT-2 merges: ", lines,
             " lines, more than any vocabulary's merges (", detail::kMaxVocab, ")");
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    ATTN_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                   line.find(' ', space + 1) == std::string_view::npos,
               "GPT-2 merges: line ", line_number, " must be two tokens and one space, got \"",
               detail::excerpt(line), "\"");
    ATTN_CHECK(static_cast<int64_t>(merges.size()) < detail::kMaxVocab, "GPT-2 merges: more than ",
               detail::kMaxVocab, " merges, more than any vocabulary");
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  return merges;
}

}  // namespace

namespace detail {

std::string gpt2_byte_spelling(unsigned char b) {
  const uint32_t cp = byte_alphabet().char_of[b];
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {  // below U+0800: two bytes
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace detail

// The merge table lives behind a pointer so that its type stays out of the public header.
Gpt2Tokenizer::Gpt2Tokenizer() : merge_rank_(std::make_unique<detail::PairRanks>()) {}
Gpt2Tokenizer::Gpt2Tokenizer(const Gpt2Tokenizer& other)
    : tokens_(other.tokens_),
      bytes_(other.bytes_),
      merges_(other.merges_),
      merged_ids_(other.merged_ids_),
      merge_rank_(std::make_unique<detail::PairRanks>(*other.merge_rank_)),
      specials_(other.specials_),
      special_ids_(other.special_ids_),
      attn_words_(other.attn_words_) {
  std::copy(std::begin(other.byte_ids_), std::end(other.byte_ids_), std::begin(byte_ids_));
}
Gpt2Tokenizer& Gpt2Tokenizer::operator=(const Gpt2Tokenizer& other) {
  if (this != &other) *this = Gpt2Tokenizer(other);
  return *this;
}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

// Builds the tables from a vocabulary, its merges in rank order and the special tokens.
class Gpt2TokenizerBuilder {
 public:
  static Gpt2Tokenizer build(const std::unordered_map<std::string, int64_t>& vocab,
                             const std::vector<std::pair<std::string, std::string>>& merges,
                             const std::vector<std::pair<std::string, int64_t>>& specials) {
    Gpt2Tokenizer t;
    int64_t size = 0;
    for (const auto& entry : vocab) size = std::max(size, entry.second + 1);
    for (const auto& special : specials) size = std::max(size, special.second + 1);
    t.tokens_.assign(static_cast<size_t>(size), "");
    t.bytes_.assign(static_cast<size_t>(size), "");
    std::vector<bool> special_id(static_cast<size_t>(size), false);
    for (const auto& [token, id] : specials) {
      // An added token may repeat a vocabulary entry (GPT-2's <|endoftext|> is both), not
      // take another token's id.
      for (const auto& [word, word_id] : vocab) {
        ATTN_CHECK(word_id != id || word == token, "GPT-2 tokenizer: added token \"",
                   detail::excerpt(token), "\" has the id ", id, " of \"", detail::excerpt(word),
                   "\"");
      }
      t.specials_.push_back(token);
      t.special_ids_.push_back(id);
      t.tokens_[static_cast<size_t>(id)] = token;
      t.bytes_[static_cast<size_t>(id)] = token;  // a special token is its own text
      special_id[static_cast<size_t>(id)] = true;
    }
    for (const auto& [token, id] : vocab) {
      if (special_id[static_cast<size_t>(id)]) continue;
      t.tokens_[static_cast<size_t>(id)] = token;
      t.bytes_[static_cast<size_t>(id)] = token_bytes(token);
    }
    auto id_of = [&](const std::string& token, const char* what, size_t rank) {
      const auto it = vocab.find(token);
      ATTN_CHECK(it != vocab.end(), "GPT-2 merges: merge ", rank, " ", what, " \"",
                 detail::excerpt(token), "\", which the vocabulary lacks");
      return it->second;
    };
    for (int b = 0; b < 256; ++b) {
      const std::string spelling = detail::gpt2_byte_spelling(static_cast<unsigned char>(b));
      const auto it = vocab.find(spelling);
      ATTN_CHECK(it != vocab.end(), "GPT-2 vocabulary: no token for byte ", b, " (spelt \"",
                 spelling, "\"); a byte-level vocabulary has all 256");
      t.byte_ids_[b] = it->second;
    }
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [a, b] = merges[rank];
      const int64_t left = id_of(a, "joins", rank), right = id_of(b, "joins", rank);
      t.merges_.emplace_back(left, right);
      t.merged_ids_.push_back(id_of(a + b, "makes", rank));
      t.merge_rank_->insert(left, right, static_cast<int64_t>(rank));
    }
    return t;
  }
};

Gpt2Tokenizer Gpt2Tokenizer::from_vocab_and_merges(std::string_view vocab_json,
                                                   std::string_view merges_text) {
  const json vocab = json::parse(vocab_json, nullptr, /*allow_exceptions=*/false);
  ATTN_CHECK(!vocab.is_discarded(), "GPT-2 vocabulary: not JSON");
  const std::unordered_map<std::string, int64_t> ids = vocab_of(vocab);
  std::vector<std::pair<std::string, int64_t>> specials;
  if (const auto it = ids.find("<|endoftext|>"); it != ids.end()) specials.push_back(*it);
  return Gpt2TokenizerBuilder::build(ids, merges_of_text(merges_text), specials);
}

namespace {

// GPT-2's pre-tokenizer (ByteLevel with its pattern; absent or null counts as it, as in files
// written by hand) gives false, attn's word split (attn export) true; any other is refused: its
// pieces, and so its ids, would not be GPT-2's.
bool uses_attn_words(const json& file) {
  if (!file.contains("pre_tokenizer") || file["pre_tokenizer"].is_null()) return false;
  const json& pre = file["pre_tokenizer"];
  if (pre == detail::attn_pre_tokenizer()) return true;
  // A field that is absent takes Hugging Face's default; one of another type fails the check.
  const auto is = [&](const char* key, const json& value, bool absent) {
    return pre.contains(key) ? pre[key] == value : absent;
  };
  ATTN_CHECK(pre.is_object() && is("type", "ByteLevel", false) && is("use_regex", true, true) &&
                 is("add_prefix_space", false, true),
             "tokenizer.json: the pre-tokenizer ", pre.dump().substr(0, 120),
             " is not GPT-2's (ByteLevel with its pattern) nor attn's word split");
  return false;
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::from_tokenizer_json(std::string_view text) {
  const json file = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ATTN_CHECK(file.is_object() && file.contains("model") && file["model"].is_object(),
             "tokenizer.json: expected an object with a \"model\"");
  const bool attn_words = uses_attn_words(file);
  const json& model = file["model"];
  ATTN_CHECK(!model.contains("type") || model["type"].is_string(),
             "tokenizer.json: the model's \"type\" must be a string, got ",
             model["type"].dump().substr(0, 40));
  ATTN_CHECK(model.value("type", "BPE") == "BPE", "tokenizer.json: the model is \"",
             model.value("type", ""), "\", not BPE");
  ATTN_CHECK(model.contains("vocab") && model.contains("merges") && model["merges"].is_array(),
             "tokenizer.json: the BPE model needs \"vocab\" and \"merges\"");
  const std::unordered_map<std::string, int64_t> ids = vocab_of(model["vocab"]);
  ATTN_CHECK(static_cast<int64_t>(model["merges"].size()) <= detail::kMaxVocab,
             "tokenizer.json: ", model["merges"].size(), " merges, more than any vocabulary (",
             detail::kMaxVocab, ")");
  std::vector<std::pair<std::string, std::string>> merges;
  for (const json& m : model["merges"]) {
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const std::vector<std::pair<std::string, std::string>> one = merges_of_text(line);
      ATTN_CHECK(one.size() == 1, "tokenizer.json: merge \"", detail::excerpt(line),
                 "\" is not \"a b\"");
      merges.push_back(one[0]);
    } else {
      ATTN_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                 "tokenizer.json: a merge must be \"a b\" or [\"a\", \"b\"], got ",
                 detail::excerpt(m.dump()));
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  std::vector<std::pair<std::string, int64_t>> specials;
  if (file.contains("added_tokens") && file["added_tokens"].is_array()) {
    for (const json& added : file["added_tokens"]) {
      ATTN_CHECK(added.is_object() && added.contains("content") && added["content"].is_string() &&
                     added.contains("id") && added["id"].is_number_integer(),
                 "tokenizer.json: an added token needs \"content\" and \"id\"");
      const int64_t id = added["id"].get<int64_t>();
      ATTN_CHECK(id >= 0 && id < detail::kMaxVocab, "tokenizer.json: added token id ", id,
                 " outside [0, 2^24)");
      ATTN_CHECK(!added["content"].get<std::string>().empty(),
                 "tokenizer.json: an added token is empty");
      specials.emplace_back(added["content"].get<std::string>(), id);
    }
  }
  Gpt2Tokenizer t = Gpt2TokenizerBuilder::build(ids, merges, specials);
  t.attn_words_ = attn_words;
  return t;
}

std::vector<std::string> Gpt2Tokenizer::files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool dir = fs::is_directory(path, ec);
  const fs::path base = dir ? fs::path(path) : fs::path(path).parent_path();
  const std::string name = dir ? "" : fs::path(path).filename().string();
  if ((dir && fs::exists(base / "tokenizer.json", ec)) || name == "tokenizer.json") {
    return {(dir ? base / "tokenizer.json" : fs::path(path)).string()};
  }
  for (const auto& [vocab, merges] :
       {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    if ((dir && fs::exists(base / vocab, ec)) || name == vocab || name == merges) {
      return {(base / vocab).string(), (base / merges).string()};
    }
  }
  throw Error(path +
              ": not GPT-2's tokenizer files (expected tokenizer.json, vocab.json + "
              "merges.txt or encoder.json + vocab.bpe)");
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& path) {
  const std::vector<std::string> found = files(path);
  auto read = [](const std::string& p) { return read_whole_file(p, kMaxTokenizerBytes); };
  const std::string first = read(found[0]);
  const std::string merges = found.size() == 2 ? read(found[1]) : std::string();
  try {
    return found.size() == 1 ? from_tokenizer_json(first) : from_vocab_and_merges(first, merges);
  } catch (const Error& e) {
    // Of two files, the merge lines' errors (all "GPT-2 merges: …") name the merges file.
    const bool about_merges = std::string_view(e.what()).starts_with("GPT-2 merges");
    throw e.in_file(found[found.size() == 2 && about_merges ? 1 : 0]);
  }
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
  thread_local std::vector<int64_t> symbols;  // kept per thread: no allocation per piece
  symbols.clear();
  for (const char c : piece) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  detail::apply_merges(symbols, *merge_rank_, merges_,
                       [this](int64_t rank) { return merged_ids_[static_cast<size_t>(rank)]; });
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int64_t> Gpt2Tokenizer::encode(std::string_view text) const {
  detail::WordSplitCache cache(std::numeric_limits<size_t>::max(), vocab_size());
  std::vector<int64_t> ids;
  encode_into(text, cache, ids);
  return ids;
}

void Gpt2Tokenizer::encode_into(std::string_view text, detail::WordSplitCache& cache,
                                std::vector<int64_t>& ids) const {
  auto split = [this](std::string_view piece, std::vector<int64_t>& out) {
    encode_piece(piece, out);
  };
  detail::split_on_specials(text, specials_, [&](std::string_view part, int64_t special) {
    if (special >= 0) {
      ids.push_back(special_ids_[static_cast<size_t>(special)]);
      return;
    }
    const auto emit = [&](std::string_view piece) { cache.append(piece, ids, split); };
    if (attn_words_) {
      detail::for_each_word(part, emit);
    } else {
      detail::for_each_gpt2_piece(part, emit);
    }
  });
}

namespace {

// Where text may be cut near `at`: the first line start at or after it that follows a single
// newline after a visible ASCII character (text[p − 2] visible, text[p − 1] == '\n', text[p]
// not whitespace), or the end. Encoding stops at such a place either way: the newline is a piece
// of its own, whether a non-space follows it (the whole text) or the text ends (the part). A
// run of two or more newlines would not be: at the end of a part it is one piece, followed by a
// word it is two. A special token holds no newline.
size_t line_start_from(std::string_view text, size_t at) {
  for (size_t p = std::max<size_t>(at, 2); p < text.size(); ++p) {
    const auto before = static_cast<unsigned char>(text[p - 2]);
    if (text[p - 1] != '\n' || before >= 0x80 ||
        detail::gpt2_class(before) == detail::Gpt2Class::kSpace)
      continue;
    if (detail::gpt2_class(detail::utf8_char_at(text, p).code_point) != detail::Gpt2Class::kSpace)
      return p;
  }
  return text.size();
}

// The same for attn's split_words: every word ends where whitespace follows a non-space, so
// the text may be cut at the first such place at or after `at`.
size_t word_start_from(std::string_view text, size_t at) {
  for (size_t p = std::max<size_t>(at, 1); p < text.size(); ++p) {
    if (detail::class_of(static_cast<unsigned char>(text[p])) == detail::CharClass::kSpace &&
        detail::class_of(static_cast<unsigned char>(text[p - 1])) != detail::CharClass::kSpace)
      return p;
  }
  return text.size();
}

}  // namespace

std::vector<int64_t> Gpt2Tokenizer::encode_parallel(std::string_view text) const {
  // A special token with a newline in it (none of GPT-2's) could span a cut: no cuts then.
  const bool cuttable = std::none_of(specials_.begin(), specials_.end(), [](const std::string& s) {
    return s.find('\n') != std::string::npos;
  });
  const size_t parts = cuttable ? static_cast<size_t>(std::max(1, num_threads())) : 1;
  std::vector<size_t> cuts = {0};
  for (size_t k = 1; k < parts; ++k) {
    const size_t at = text.size() * k / parts;
    cuts.push_back(
        std::max(cuts.back(), attn_words_ ? word_start_from(text, at) : line_start_from(text, at)));
  }
  cuts.push_back(text.size());
  std::vector<std::vector<int64_t>> ids(parts);
  parallel_for(static_cast<int64_t>(parts), [&](int64_t k) {
    const size_t i = static_cast<size_t>(k);
    ids[i] = encode(text.substr(cuts[i], cuts[i + 1] - cuts[i]));
  });
  std::vector<int64_t> all;
  for (const auto& part : ids) all.insert(all.end(), part.begin(), part.end());
  return all;
}

std::vector<std::vector<int64_t>> Gpt2Tokenizer::encode_batch(
    const std::vector<std::string>& texts) const {
  // Run k holds the texts whose bytes start in [k, k + 1) · total / runs.
  const size_t runs = std::min(texts.size(), static_cast<size_t>(std::max(1, num_threads())));
  size_t total = 0;
  for (const std::string& t : texts) total += t.size();
  std::vector<size_t> first(runs + 1, texts.size());
  for (size_t i = 0, k = 0, seen = 0; i < texts.size(); seen += texts[i].size(), ++i) {
    while (k < runs && seen >= total / runs * k) first[k++] = i;
  }
  std::vector<std::vector<int64_t>> ids(texts.size());
  parallel_for(static_cast<int64_t>(runs), [&](int64_t k) {
    detail::WordSplitCache cache(std::numeric_limits<size_t>::max(), vocab_size());
    for (size_t i = first[static_cast<size_t>(k)]; i < first[static_cast<size_t>(k) + 1]; ++i) {
      encode_into(texts[i], cache, ids[i]);
    }
  });
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  for (const int64_t id : ids) {
    ATTN_CHECK(id >= 0 && id < vocab_size() && !tokens_[static_cast<size_t>(id)].empty(),
               "Gpt2Tokenizer::decode: id ", id, " is not in the vocabulary");
    text += bytes_[static_cast<size_t>(id)];
  }
  return text;
}

const std::string& Gpt2Tokenizer::display(int64_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "Gpt2Tokenizer::display: id ", id,
             " is not in the vocabulary");
  return tokens_[static_cast<size_t>(id)];
}

std::optional<int64_t> Gpt2Tokenizer::special_id(std::string_view token) const {
  for (size_t i = 0; i < specials_.size(); ++i) {
    if (specials_[i] == token) return special_ids_[i];
  }
  return std::nullopt;
}

std::vector<int64_t> Gpt2Tokenizer::default_prompt() const {
  const std::optional<int64_t> end_of_text = special_id("<|endoftext|>");
  return end_of_text ? std::vector<int64_t>{*end_of_text} : encode("\n");
}

}  // namespace attn
