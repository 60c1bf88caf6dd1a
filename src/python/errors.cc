// mosaic::Error (bad input: a damaged checkpoint, an invalid option, a budget no chunking
// meets) becomes mosaic.Error, a ValueError, carrying the C++ one-line message unchanged.
#include "mosaic/error.h"
#include "python/bindings.h"

namespace mosaic::python {

void bind_errors(py::module_& m) {
  py::register_exception<mosaic::Error>(m, "Error", PyExc_ValueError);
}

}  // namespace mosaic::python
