// mosaic::Error (bad input: a damaged checkpoint, an invalid option, a budget no chunking
// meets) becomes mosaic.Error, a ValueError, carrying the C++ one-line message (bytes that are not UTF-8
// escaped).
#include "mosaic/error.h"
#include "python/bindings.h"

namespace mosaic::python {

void bind_errors(py::module_& m) {
  // Never destroyed: the interpreter owns the type, and a static destructor would run after it.
  static auto* const error = new py::exception<mosaic::Error>(m, "Error", PyExc_ValueError);
  // A message may quote bytes from a damaged file that are not UTF-8: PyErr_SetString would drop
  // the whole message then, so undecodable bytes are escaped instead (\xff).
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const mosaic::Error& e) {
      const std::string what = e.what();
      py::object message = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "backslashreplace"));
      if (!message) {
        PyErr_Clear();
        message = py::str("(an error message that could not be decoded)");
      }
      PyErr_SetObject(error->ptr(), message.ptr());
    }
  });
}

}  // namespace mosaic::python
