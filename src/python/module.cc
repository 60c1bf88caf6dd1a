// The extension module mosaic._mosaic. Users import the package `mosaic` (python/mosaic/), which
// wraps these bindings with Python conveniences.
#include "python/bindings.h"

PYBIND11_MODULE(_mosaic, m) {
  using namespace mosaic::python;
  m.doc() = "Mosaic's C++ engine (the package `mosaic` is the interface to use)";
  m.attr("__version__") = MOSAIC_VERSION;
  bind_errors(m);
  bind_engine(m);
  bind_generation_kwargs(m);
  bind_plan(m);
  bind_test_model(m);
}
