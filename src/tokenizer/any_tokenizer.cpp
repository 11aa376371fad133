// attn::Tokenizer: a CharTokenizer, a BpeTokenizer or GPT-2's, and the character tokenizer's
// JSON form.
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"

namespace attn {

namespace {

// f(t) for the tokenizer held, with a different f for each kind where they differ.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;  // spelt out for compilers before C++20's aggregate CTAD

}  // namespace

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  return std::visit(Overloaded{[&](const CharTokenizer& t) { return t.encode(text); },
                               [&](const auto& t) { return t.encode_parallel(text); }},
                    impl_);
}

std::string Tokenizer::decode(std::span<const int64_t> ids) const {
  return std::visit([&](const auto& t) { return t.decode(ids); }, impl_);
}

std::string Tokenizer::display(int64_t id) const {
  return std::visit(Overloaded{[&](const CharTokenizer& t) {
                                 const int64_t one[] = {id};
                                 return detail::display_characters(t.decode(one));
                               },
                               [&](const auto& t) { return std::string(t.display(id)); }},
                    impl_);
}

int64_t Tokenizer::vocab_size() const {
  return std::visit([](const auto& t) { return t.vocab_size(); }, impl_);
}

std::string Tokenizer::kind() const {
  return std::visit(Overloaded{[](const CharTokenizer&) { return "char"; },
                               [](const BpeTokenizer&) { return "bpe"; },
                               [](const Gpt2Tokenizer&) { return "gpt2"; }},
                    impl_);
}

std::vector<int64_t> Tokenizer::default_prompt() const {
  if (const Gpt2Tokenizer* g = gpt2()) return g->default_prompt();
  try {
    return encode("\n");
  } catch (const Error&) {
    return {0};
  }
}

std::string Tokenizer::to_json() const {
  if (const BpeTokenizer* b = bpe()) return b->to_json();
  ATTN_CHECK(gpt2() == nullptr, "GPT-2's tokenizer is kept in Hugging Face's files, not as JSON ",
             "of attn's (Gpt2Tokenizer::load reads them)");
  const nlohmann::json j = {{"format", "attn-char"},
                            {"version", 1},
                            {"characters", std::get<CharTokenizer>(impl_).characters()}};
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
