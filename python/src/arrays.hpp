// numpy arrays <-> attn::Tensor without copies where the memory allows it.
//   in:  float32 arrays whose last dim is contiguous (any other strides: a transpose, a slice)
//        are viewed in place; other float dtypes are converted to float32 once; booleans and
//        integers only where a mask is taken (non-zero = allowed).
//   out: a Tensor becomes an array over the tensor's own memory (the array keeps it alive).
//   torch: once attn.torch has named torch's types (set_torch_types), a float32 CPU
//        torch.Tensor whose last dim is contiguous is read in place too, without numpy, and a
//        bfloat16 one can be seen as a Bfloat16View (attn.torch's bf16 forward).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>

#include "attn/sdpa_bfloat16.hpp"
#include "attn/tensor.hpp"

namespace attn::python {

namespace py = pybind11;

// What an input may be.
enum class Accept { kFloat, kMask };

// obj as a Tensor of rank 1..4 (TypeError for what is not a numeric array, ValueError for a
// wrong rank or a last dim that is not contiguous); `name` is in every message.
Tensor to_tensor(const py::handle& obj, const char* name, Accept accept = Accept::kFloat);
// obj as a Tensor over its own memory, for the library to write into: a writeable,
// C-contiguous float32 numpy array or contiguous float32 CPU torch.Tensor of rank 1..4 (never
// converted: a copy would take the writes); ValueError naming it otherwise.
Tensor to_output_tensor(const py::handle& obj, const char* name);
// None -> an undefined Tensor.
Tensor to_optional_tensor(const py::handle& obj, const char* name);
// True when obj is a numpy array of booleans or integers (a mask that allows, not adds).
bool is_boolean_like(const py::handle& obj);

// The tensor's memory as a float32 array of its shape and strides (no copy).
py::array to_array(const Tensor& t);

// torch.Tensor, torch.float32 and torch.bfloat16, from attn.torch as it loads: attn never
// imports torch itself.
void set_torch_types(py::object tensor_type, py::object float32, py::object bfloat16);
// obj as a Tensor over its own memory when it is a float32 CPU torch.Tensor of rank 1..4, no
// dim empty, its last dim contiguous; nullopt for anything else.
std::optional<Tensor> torch_in_place(const py::handle& obj);

// obj as a view of its own memory when it is a bfloat16 CPU torch.Tensor (exactly that type),
// valid while obj lives; nullopt for anything else. Its rank and strides are sdpa_bfloat16's to
// check.
std::optional<Bfloat16View> torch_bfloat16_view(const py::handle& obj);

// How many inputs were converted (copied) so far: the zero-copy tests read it.
int64_t conversions();

}  // namespace attn::python
