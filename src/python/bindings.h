// The parts of the extension module mosaic._mosaic, one function per part (module.cc calls them).
// The module is a thin, typed layer over the public C++ API (include/mosaic/); argument
// conveniences (text or ids, "24GiB", defaults) live in the Python package (python/mosaic/).
#pragma once

#include <pybind11/pybind11.h>

#include "mosaic/engine.h"

namespace mosaic::python {

namespace py = pybind11;
using EngineClass = py::class_<Engine, std::unique_ptr<Engine>>;

void bind_errors(py::module_& m);             // mosaic::Error -> _mosaic.Error (a ValueError)
void bind_engine(py::module_& m);             // _Engine: open, info, forward, encode, decode
void bind_generate(EngineClass& engine);      // _Engine.generate: GIL released, per-step events
void bind_generation_kwargs(py::module_& m);  // SAMPLING_OPTIONS: the keyword names generate takes
void bind_plan(py::module_& m);               // plan_json, find_lmax_json
void bind_test_model(py::module_& m);         // make_test_model

}  // namespace mosaic::python
