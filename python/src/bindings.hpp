// The parts of the module, each registering its functions and classes.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace attn::python {

void add_attention(pybind11::module_& m, pybind11::module_& reference);
void add_layers(pybind11::module_& m);
void add_text(pybind11::module_& m);
void add_model(pybind11::module_& m);
void add_training(pybind11::module_& m);

// A str as UTF-8 bytes; a ValueError naming `name` for one that is not valid Unicode.
std::string utf8_of(const pybind11::handle& text, const char* name);
// A path (str or os.PathLike) as a string; a TypeError naming `name` for anything else.
std::string path_of(const pybind11::handle& path, const char* name);

// A corpus: a str, bytes, a list of either (joined by newlines) or a path (os.PathLike), as
// its bytes (text.cpp; attn.train_bpe and attn.train read it).
std::string corpus_text(const pybind11::handle& corpus);

}  // namespace attn::python
