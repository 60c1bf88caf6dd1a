// Mosaic's built-in model (models/kjv-llada-12m, docs/default-model.md): what `mosaic generate`
// runs when no --model is given.
#pragma once

#include <filesystem>

namespace mosaic::cli {

// $MOSAIC_DEFAULT_MODEL when set (an error if it holds no config.json); else the first of the
// source tree's models/kjv-llada-12m (compiled in) and ../share/mosaic/models/kjv-llada-12m beside
// the executable (an installed layout) that holds a config.json. Throws mosaic::Error listing
// where it looked.
std::filesystem::path builtin_model_dir();

}  // namespace mosaic::cli
