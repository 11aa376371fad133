// What attn.Gpt holds, shared by the module's files: model.cpp binds it, training.cpp
// returns one from attn.train.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attn/gpt.hpp"
#include "attn/tokenizer.hpp"

namespace attn::python {

// A model and the tokenizer its ids belong to: attn train's, or GPT-2's beside a Hugging Face
// model.
struct LoadedGpt {
  Gpt model;
  Tokenizer tokenizer;
};

// What attn.Gpt holds: the model, shared with the generations started from it.
struct PyGpt {
  std::shared_ptr<LoadedGpt> loaded;
};

}  // namespace attn::python
