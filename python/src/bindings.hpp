// The parts of the module, each registering its functions and classes.
#pragma once

#include <pybind11/pybind11.h>

namespace attn::python {

void add_attention(pybind11::module_& m, pybind11::module_& reference);
void add_layers(pybind11::module_& m);
void add_text(pybind11::module_& m);
void add_model(pybind11::module_& m);

}  // namespace attn::python
