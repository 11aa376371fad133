#include "arrays.hpp"

#include <atomic>
#include <memory>
#include <string>

namespace attn::python {
namespace {

using namespace pybind11::literals;

std::atomic<int64_t> g_conversions{0};

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

}  // namespace

int64_t conversions() { return g_conversions.load(); }

bool is_boolean_like(const py::handle& obj) {
  if (!py::isinstance<py::array>(obj)) return false;
  const char kind = py::reinterpret_borrow<py::array>(obj).dtype().kind();
  return kind == 'b' || kind == 'i' || kind == 'u';
}

Tensor to_tensor(const py::handle& obj, const char* name, Accept accept) {
  if (obj.is_none()) throw py::type_error(std::string(name) + " is required, got None");
  py::array array;
  if (py::isinstance<py::array>(obj)) {
    array = py::reinterpret_borrow<py::array>(obj);
  } else {
    try {
      array = py::array::ensure(obj);
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
  int64_t lo = 0, hi = 0;  // the elements the view reaches, relative to its first
  for (py::ssize_t d = 0; d < rank; ++d) {
    if (array.strides(d) % 4 != 0) {
      throw py::value_error(std::string(name) + ": strides that are not whole floats");
    }
    shape.push_back(array.shape(d));
    strides.push_back(array.shape(d) == 1 ? 0 : array.strides(d) / 4);
    const int64_t reach = strides.back() * (shape.back() - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  auto* first = static_cast<float*>(const_cast<void*>(array.data()));
  return Tensor::from_external(first + lo, hi - lo + 1, std::move(shape), std::move(strides), -lo,
                               keep_alive(array));
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
