// What attn.Gpt holds, shared by the module's files: model.cpp binds it, training.cpp
// returns one from attn.train.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "attn/gpt.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "attn/tokenizer.hpp"

namespace attn::python {

// A model and the tokenizer its ids belong to: attn train's, or GPT-2's beside a Hugging Face
// model.
struct LoadedGpt {
  Gpt model;
  std::variant<Tokenizer, Gpt2Tokenizer> tokenizer;

  std::vector<int64_t> encode(std::string_view text) const {
    return std::visit([&](const auto& t) { return t.encode(text); }, tokenizer);
  }
  std::string decode(std::span<const int64_t> ids) const {
    return std::visit([&](const auto& t) { return t.decode(ids); }, tokenizer);
  }
  std::vector<int64_t> default_prompt() const {
    return std::visit([](const auto& t) { return t.default_prompt(); }, tokenizer);
  }
};

// What attn.Gpt holds: the model, shared with the generations started from it.
struct PyGpt {
  std::shared_ptr<LoadedGpt> loaded;
};

}  // namespace attn::python
