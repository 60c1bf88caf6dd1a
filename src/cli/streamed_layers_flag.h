// --streamed-layers N (EngineOptions::streamed_layers; docs/design/weight-staging.md), the same
// flag in `generate`, `serve`, `forward` and `bench step`: registered once here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

namespace mosaic::cli {

inline CLI::Option* add_streamed_layers_flag(CLI::App* c, int64_t& count) {
  return c->add_option("--streamed-layers", count,
                       "Keep the last N decoder layers' weights in pinned host memory, copied in one layer ahead "
                       "(CUDA; 'mosaic plan --weights auto' names N)");
}

}  // namespace mosaic::cli
