#include "arrays.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace attn::python {
namespace {

using namespace pybind11::literals;

std::atomic<int64_t> g_conversions{0};

// torch's types, set once by attn.torch, and the names of the attributes read from a tensor,
// made once; never freed (the interpreter may be gone by then).
PyObject* g_torch_tensor_type = nullptr;
PyObject* g_torch_float32 = nullptr;
PyObject* g_torch_bfloat16 = nullptr;
struct TensorAttributes {
  PyObject* is_cpu = PyUnicode_InternFromString("is_cpu");
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* stride = PyUnicode_InternFromString("stride");
  PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
};
const TensorAttributes* g_tensor_attributes = nullptr;

// A reference to a Python object that may be dropped on any thread: the deleter takes the GIL.
std::shared_ptr<void> keep_alive(py::object obj) {
  auto* held = new py::object(std::move(obj));
  return std::shared_ptr<void>(held, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
}

// `array` as float32 with a contiguous last dim, converted on its distinct elements only: a
// dim broadcast by stride 0 (np.broadcast_to) is converted as one entry and broadcast again,
// so a boolean mask broadcast to (65536, 65536) costs one row of floats, not 16 GiB. The last
// dim is materialised, as the kernels read rows.
py::array to_float32_rows(const py::array& array) {
  const auto rank = array.ndim();
  py::tuple distinct(rank);
  for (py::ssize_t d = 0; d < rank; ++d) {
    const bool broadcast = d + 1 < rank && array.shape(d) > 1 && array.strides(d) == 0;
    distinct[d] = broadcast ? py::slice(0, 1, 1) : py::slice(py::none(), py::none(), py::none());
  }
  const py::module_ numpy = py::module_::import("numpy");
  py::object rows = numpy.attr("ascontiguousarray")(array[distinct], "dtype"_a = "float32");
  g_conversions.fetch_add(1);
  return numpy.attr("broadcast_to")(rows, array.attr("shape"));
}

// The view of `count` elements around `first` that shape and strides (in floats) describe, its
// memory kept alive by `owner`.
Tensor view_of(float* first, Shape shape, Shape strides, py::object owner) {
  int64_t lo = 0, hi = 0;  // the elements the view reaches, relative to its first
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) strides[d] = 0;
    const int64_t reach = strides[d] * (shape[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  return Tensor::from_external(first + lo, hi - lo + 1, std::move(shape), std::move(strides), -lo,
                               keep_alive(std::move(owner)));
}

// Exactly torch.Tensor: a subclass (a Parameter, a FakeTensor) takes the numpy route.
bool is_torch_tensor(const py::handle& obj) {
  return g_torch_tensor_type != nullptr &&
         reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())) == g_torch_tensor_type;
}

// A torch.Tensor as a Tensor when it is a float32 CPU tensor of rank 1..4, no dim of it empty,
// its last dim contiguous: its data pointer, sizes and strides read through torch's own
// attributes (a few hundred ns where Tensor.numpy() took ~2 us). Anything else: nullopt, and
// its numpy view takes the numpy route, whose checks and conversions name what is wrong.
std::optional<Tensor> torch_view(const py::handle& obj) {
  const TensorAttributes& names = *g_tensor_attributes;
  if (!obj.attr(py::handle(names.is_cpu)).cast<bool>()) return std::nullopt;
  const py::object dtype = obj.attr(py::handle(names.dtype));
  if (dtype.ptr() != g_torch_float32) return std::nullopt;
  const auto sizes = obj.attr(py::handle(names.shape)).cast<py::tuple>();
  const auto strides = obj.attr(py::handle(names.stride))().cast<py::tuple>();
  const auto rank = static_cast<int64_t>(sizes.size());
  if (rank < 1 || rank > Tensor::kMaxRank) return std::nullopt;
  Shape shape, float_strides;
  for (int64_t d = 0; d < rank; ++d) {
    shape.push_back(sizes[d].cast<int64_t>());
    float_strides.push_back(strides[d].cast<int64_t>());
    if (shape.back() == 0) return std::nullopt;
  }
  if (shape.back() > 1 && float_strides.back() != 1) return std::nullopt;
  auto* first = reinterpret_cast<float*>(obj.attr(py::handle(names.data_ptr))().cast<uintptr_t>());
  return view_of(first, std::move(shape), std::move(float_strides),
                 py::reinterpret_borrow<py::object>(obj));
}

}  // namespace

void set_torch_types(py::object tensor_type, py::object float32, py::object bfloat16) {
  if (g_tensor_attributes == nullptr) g_tensor_attributes = new TensorAttributes;
  g_torch_tensor_type = tensor_type.release().ptr();
  g_torch_float32 = float32.release().ptr();
  g_torch_bfloat16 = bfloat16.release().ptr();
}

std::optional<Bfloat16View> torch_bfloat16_view(const py::handle& obj) {
  if (!is_torch_tensor(obj)) return std::nullopt;
  const TensorAttributes& names = *g_tensor_attributes;
  if (!obj.attr(py::handle(names.is_cpu)).cast<bool>()) return std::nullopt;
  if (obj.attr(py::handle(names.dtype)).ptr() != g_torch_bfloat16) return std::nullopt;
  const auto sizes = obj.attr(py::handle(names.shape)).cast<py::tuple>();
  const auto strides = obj.attr(py::handle(names.stride))().cast<py::tuple>();
  Bfloat16View view;
  for (size_t d = 0; d < sizes.size(); ++d) {
    view.shape.push_back(sizes[d].cast<int64_t>());
    view.strides.push_back(strides[d].cast<int64_t>());
  }
  view.data =
      reinterpret_cast<const uint16_t*>(obj.attr(py::handle(names.data_ptr))().cast<uintptr_t>());
  return view;
}

std::optional<Tensor> torch_in_place(const py::handle& obj) {
  if (!is_torch_tensor(obj)) return std::nullopt;
  return torch_view(obj);
}

int64_t conversions() { return g_conversions.load(); }

bool is_boolean_like(const py::handle& obj) {
  if (!py::isinstance<py::array>(obj)) return false;
  const char kind = py::reinterpret_borrow<py::array>(obj).dtype().kind();
  return kind == 'b' || kind == 'i' || kind == 'u';
}

Tensor to_tensor(const py::handle& obj, const char* name, Accept accept) {
  if (obj.is_none()) throw py::type_error(std::string(name) + " is required, got None");
  if (std::optional<Tensor> in_place = torch_in_place(obj)) return *std::move(in_place);
  py::object source = py::reinterpret_borrow<py::object>(obj);
  if (is_torch_tensor(obj)) source = obj.attr("detach")().attr("numpy")();
  py::array array;
  if (py::isinstance<py::array>(source)) {
    array = py::reinterpret_borrow<py::array>(source);
  } else {
    try {
      array = py::array::ensure(source);
    } catch (const py::error_already_set&) {
    }
    if (!array) {
      throw py::type_error(std::string(name) +
                           " must be a numpy array (or a nested list of "
                           "numbers), got " +
                           std::string(py::str(py::type::of(obj).attr("__name__"))));
    }
  }
  const char kind = array.dtype().kind();
  const bool floating = kind == 'f';
  const bool maskish = kind == 'b' || kind == 'i' || kind == 'u';
  if (!floating && !(maskish && accept == Accept::kMask)) {
    throw py::type_error(std::string(name) + " must hold floating-point numbers" +
                         (accept == Accept::kMask ? " (or booleans / integers for a mask)" : "") +
                         ", got dtype " + std::string(py::str(array.dtype())));
  }
  const auto rank = array.ndim();
  if (rank < 1 || rank > Tensor::kMaxRank) {
    throw py::value_error(std::string(name) + " has rank " + std::to_string(rank) +
                          "; attn's arrays have 1 to 4 dims");
  }
  for (py::ssize_t d = 0; d < rank; ++d) {
    if (array.shape(d) == 0) throw py::value_error(std::string(name) + " is empty");
  }
  const bool rows_contiguous = array.shape(rank - 1) == 1 || array.strides(rank - 1) == 4;
  // Converted once, to float32 (a mask's broadcast last dim too: masks are often (T, 1) views).
  if (!floating || array.dtype().itemsize() != 4 || (accept == Accept::kMask && !rows_contiguous)) {
    array = to_float32_rows(array);
  }
  if (array.shape(rank - 1) > 1 && array.strides(rank - 1) != 4) {
    throw py::value_error(std::string(name) +
                          ": its last dim must be contiguous (stride 4 bytes), "
                          "got a stride of " +
                          std::to_string(array.strides(rank - 1)) +
                          " bytes; pass np.ascontiguousarray(" + name + ")");
  }
  Shape shape, strides;
  for (py::ssize_t d = 0; d < rank; ++d) {
    if (array.strides(d) % 4 != 0) {
      throw py::value_error(std::string(name) + ": strides that are not whole floats");
    }
    shape.push_back(array.shape(d));
    strides.push_back(array.strides(d) / 4);
  }
  auto* first = static_cast<float*>(const_cast<void*>(array.data()));
  return view_of(first, std::move(shape), std::move(strides), array);
}

Tensor to_output_tensor(const py::handle& obj, const char* name) {
  if (std::optional<Tensor> in_place = torch_in_place(obj)) {
    if (in_place->is_contiguous()) return *std::move(in_place);
  } else if (py::isinstance<py::array>(obj)) {
    const auto array = py::reinterpret_borrow<py::array>(obj);
    const bool float32 = array.dtype().kind() == 'f' && array.dtype().itemsize() == 4;
    const bool c_order = (array.flags() & py::array::c_style) != 0;
    if (float32 && c_order && array.writeable() && array.ndim() >= 1 &&
        array.ndim() <= Tensor::kMaxRank && array.size() > 0) {
      return to_tensor(obj, name);  // float32 with contiguous rows: viewed in place
    }
  }
  throw py::value_error(std::string(name) +
                        " receives the result, so it must be a writeable, C-contiguous float32 "
                        "numpy array (or CPU torch tensor) of rank 1 to 4, got " +
                        std::string(py::str(py::repr(obj))).substr(0, 80));
}

Tensor to_optional_tensor(const py::handle& obj, const char* name) {
  return obj.is_none() ? Tensor{} : to_tensor(obj, name);
}

py::array to_array(const Tensor& t) {
  std::vector<py::ssize_t> shape, strides;
  for (int i = 0; i < t.rank(); ++i) {
    shape.push_back(t.dim(i));
    strides.push_back(static_cast<py::ssize_t>(t.strides()[static_cast<size_t>(i)]) * 4);
  }
  // The capsule holds a handle of the tensor, and so its memory, for the array's lifetime.
  auto* handle = new Tensor(t);
  py::capsule owner(handle, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(py::dtype::of<float>(), shape, strides, handle->data(), owner);
}

}  // namespace attn::python
