// Keyword arguments -> mosaic::GenerationOptions. The names are the `mosaic generate` options
// with underscores (gen_length, steps, block_length, temperature, seed, remasking, ...); a
// misspelt name is a TypeError, a value of the wrong type a TypeError, an unknown choice a
// ValueError. Ranges and family rules are the engine's to check (mosaic.Error).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "mosaic/generation_options.h"

namespace mosaic::python {

GenerationOptions generation_options_from_kwargs(const pybind11::dict& kwargs);

// Every accepted name, in the order of GenerationOptions.
const std::vector<std::string>& sampling_option_names();

}  // namespace mosaic::python
