// The tiny call through pybind11, as attn's module binds sdpa: three float32 arrays in, keyword
// options, a new array out whose capsule owns the memory. The "kernel" copies q to the output,
// so that what is timed is the binding.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

py::array call(const py::array_t<float, py::array::c_style>& q, const py::array_t<float>& k,
               const py::array_t<float>& v, bool causal, const py::object& mask,
               std::optional<float> scale, const std::string& causal_align, bool return_lse) {
  (void)k, (void)v, (void)causal, (void)mask, (void)scale, (void)causal_align, (void)return_lse;
  auto* out = new float[static_cast<size_t>(q.size())];
  {
    py::gil_scoped_release unlocked;
    std::copy_n(q.data(), q.size(), out);
  }
  py::capsule owner(out, [](void* p) { delete[] static_cast<float*>(p); });
  return py::array_t<float>(std::vector<py::ssize_t>(q.shape(), q.shape() + q.ndim()), out, owner);
}

// torch tensors read as attn's module reads them (python/src/arrays.cpp): the data pointer,
// sizes and strides through torch's own attributes; the output a numpy array the caller wraps
// with torch.from_numpy.
py::array call_reading_torch(const py::object& q, const py::object& k, const py::object& v,
                             bool causal, const py::object& mask, std::optional<float> scale,
                             const std::string& causal_align, bool return_lse) {
  std::vector<py::ssize_t> shape;
  const float* first = nullptr;
  for (const py::object* t : {&q, &k, &v}) {
    if (!t->attr("is_cpu").cast<bool>()) throw py::value_error("not on the CPU");
    const auto sizes = t->attr("shape").cast<py::tuple>();
    const auto strides = t->attr("stride")().cast<py::tuple>();
    if (strides[sizes.size() - 1].cast<int64_t>() != 1) throw py::value_error("strided rows");
    const auto* data = reinterpret_cast<const float*>(t->attr("data_ptr")().cast<uintptr_t>());
    if (t == &q) {
      first = data;
      for (const auto& size : sizes) shape.push_back(size.cast<py::ssize_t>());
    }
  }
  py::ssize_t count = 1;
  for (const py::ssize_t size : shape) count *= size;
  auto* out = new float[static_cast<size_t>(count)];
  {
    py::gil_scoped_release unlocked;
    std::copy_n(first, count, out);
  }
  (void)causal, (void)mask, (void)scale, (void)causal_align, (void)return_lse;
  py::capsule owner(out, [](void* p) { delete[] static_cast<float*>(p); });
  return py::array_t<float>(shape, out, owner);
}

}  // namespace

PYBIND11_MODULE(with_pybind11, m) {
  m.def("call", &call, "q"_a, "k"_a, "v"_a, py::kw_only(), "causal"_a = false,
        "mask"_a = py::none(), "scale"_a = py::none(), "causal_align"_a = "top-left",
        "return_lse"_a = false);
  m.def("call_reading_torch", &call_reading_torch, "q"_a, "k"_a, "v"_a, py::kw_only(),
        "causal"_a = false, "mask"_a = py::none(), "scale"_a = py::none(),
        "causal_align"_a = "top-left", "return_lse"_a = false);
}
