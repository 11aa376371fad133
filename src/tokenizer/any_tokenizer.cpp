// attn::Tokenizer: a CharTokenizer or a BpeTokenizer, and the character tokenizer's JSON form.
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"

namespace attn {

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  return bpe_ ? bpe_->encode_parallel(text) : char_->encode(text);
}

std::string Tokenizer::decode(std::span<const int64_t> ids) const {
  return bpe_ ? bpe_->decode(ids) : char_->decode(ids);
}

std::string Tokenizer::display(int64_t id) const {
  if (bpe_) return bpe_->display(id);
  const int64_t one[] = {id};
  return detail::display_characters(char_->decode(one));
}

int64_t Tokenizer::vocab_size() const { return bpe_ ? bpe_->vocab_size() : char_->vocab_size(); }

std::vector<int64_t> Tokenizer::default_prompt() const {
  try {
    return encode("\n");
  } catch (const Error&) {
    return {0};
  }
}

std::string Tokenizer::to_json() const {
  if (bpe_) return bpe_->to_json();
  const nlohmann::json j = {
      {"format", "attn-char"}, {"version", 1}, {"characters", char_->characters()}};
  return j.dump();
}

Tokenizer Tokenizer::from_json(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("tokenizer: not JSON: ") + e.what());
  }
  ATTN_CHECK(j.is_object() && j.contains("format") && j["format"].is_string(),
             "tokenizer: the JSON has no \"format\"");
  const std::string format = j["format"].get<std::string>();
  if (format == "attn-bpe") return BpeTokenizer::from_json(text);
  ATTN_CHECK(format == "attn-char", "tokenizer: unknown format \"", format, "\"");
  ATTN_CHECK(j.contains("version") && j["version"] == 1, "tokenizer: attn-char version must be 1");
  ATTN_CHECK(j.contains("characters") && j["characters"].is_array(),
             "tokenizer: attn-char needs a \"characters\" array");
  std::vector<std::string> characters;
  for (const nlohmann::json& c : j["characters"]) {
    ATTN_CHECK(c.is_string(), "tokenizer: attn-char characters must be strings");
    characters.push_back(c.get<std::string>());
  }
  ATTN_CHECK(!characters.empty(), "tokenizer: attn-char has no characters");
  return CharTokenizer::from_characters(std::move(characters));
}

}  // namespace attn
