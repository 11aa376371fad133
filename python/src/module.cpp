// The `attn` Python module (pybind11): the library's attention, layers, tokenizer and GPT over
// numpy arrays, zero-copy where the memory allows (arrays.hpp), the GIL released while a
// kernel runs. attn::Error becomes attn.Error, a subclass of ValueError, with the error's kind,
// argument and file as attributes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "arrays.hpp"
#include "attn/error.hpp"
#include "attn/simd.hpp"
#include "attn/threads.hpp"
#include "attn/version.hpp"
#include "bindings.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_attn, m) {
  m.doc() = "attn: causal multi-head attention in C++20, from numpy.";
  // attn.Error carries the C++ error's kind ("invalid_argument" or "file"), argument and file
  // (None where the error has none) as attributes.
  static py::exception<attn::Error> error_type(m, "Error", PyExc_ValueError);
  // pybind11 takes a translator of exactly this signature: the pointer comes by value.
  py::register_local_exception_translator([](std::exception_ptr thrown) {  // NOLINT
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const attn::Error& e) {
      py::object error = py::handle(error_type.ptr())(e.what());  // an instance, not yet raised
      error.attr("kind") = e.kind() == attn::ErrorKind::kFile ? "file" : "invalid_argument";
      error.attr("argument") =
          e.argument().empty() ? py::object(py::none()) : py::str(e.argument());
      error.attr("file") = e.file().empty() ? py::object(py::none()) : py::str(e.file());
      PyErr_SetObject(error_type.ptr(), error.ptr());
    }
  });
  m.attr("__version__") = attn::version();
  // The limit from its constant; static, so the text outlives this call.
  static const std::string set_num_threads_doc =
      "set_num_threads(n): threads for every parallel loop, 1 to " +
      std::to_string(attn::kMaxThreads) + " (0 = the default).";
  m.def("set_num_threads", &attn::set_num_threads, set_num_threads_doc.c_str(), py::arg("n"));
  m.def("get_num_threads", &attn::num_threads, "The thread count in use.");
  attn::limit_simd_from_environment();  // ATTN_SIMD, as the CLI reads it
  m.def(
      "limit_simd", [](const std::string& name) { attn::limit_simd(name); },
      "limit_simd(name): cap the SIMD instruction set at 'avx512', 'avx2' or 'portable' "
      "('best' lifts it); before the first matrix product.",
      py::arg("name"));
  m.def("simd_target", &attn::simd_target,
        "The SIMD instruction set the kernels run, as Highway names it ('AVX3' is AVX-512).");
  m.def("bf16_attention_engine", &attn::bf16_attention_engine,
        "What attention's bf16 products (precision='bf16') run on now: 'amx' (AMX tiles), "
        "'vdpbf16ps' (AVX-512 BF16, AMD's CPUs without AMX) or 'vector' (the float kernels on "
        "rounded values).");
  m.def("_set_torch_types", &attn::python::set_torch_types,
        "attn.torch hands over torch.Tensor, torch.float32 and torch.bfloat16 as it loads, so "
        "that float32 and bfloat16 CPU tensors are read in place without numpy.",
        py::arg("tensor_type"), py::arg("float32"), py::arg("bfloat16"));
  m.def("_conversions", &attn::python::conversions,
        "How many array arguments were converted (copied) so far: for the zero-copy tests.");
  py::module_ reference = m.def_submodule("reference", "The readable reference path.");
  attn::python::add_attention(m, reference);
  attn::python::add_layers(m);
  attn::python::add_text(m);
  attn::python::add_model(m);
  attn::python::add_training(m);
}
