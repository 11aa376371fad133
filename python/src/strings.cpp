// Python text and paths to C++ strings, with the errors a Python user expects: a str that is not
// valid Unicode (a lone surrogate) is a ValueError naming the argument, not pybind11's "Unable
// to cast"; a path that is not a str or os.PathLike (None, say) is a TypeError, not "None:
// cannot open".
#include <string>

#include "bindings.hpp"

namespace attn::python {

namespace py = pybind11;

std::string utf8_of(const py::handle& text, const char* name) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data == nullptr) {
    const py::error_already_set encoding;  // the codec's own words: which character, where
    throw py::value_error(std::string(name) + " is not valid Unicode text: " + encoding.what());
  }
  return std::string(data, static_cast<size_t>(size));
}

std::string path_of(const py::handle& path, const char* name) {
  if (!py::isinstance<py::str>(path) && !py::hasattr(path, "__fspath__")) {
    throw py::type_error(std::string(name) + " must be a path (str or os.PathLike), got " +
                         std::string(py::str(py::type::of(path).attr("__name__"))));
  }
  const py::object fspath = py::module_::import("os").attr("fspath")(path);
  if (!py::isinstance<py::str>(fspath)) {
    throw py::type_error(std::string(name) + " must be a str path, got bytes");
  }
  std::string utf8 = utf8_of(fspath, name);
  if (utf8.find('\0') != std::string::npos) {  // the OS would read the path only up to it
    throw py::value_error(std::string(name) + " holds a NUL character, which no path may hold");
  }
  return utf8;
}

}  // namespace attn::python
