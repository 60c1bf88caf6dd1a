// --streamed-layers auto|N (EngineOptions::streamed_layers; docs/design/weight-staging.md), the
// same flag in `generate`, `serve`, `forward` and `bench step`: registered once here.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "mosaic/engine.h"

namespace mosaic::cli {

inline CLI::Option* add_streamed_layers_flag(CLI::App* c, int64_t& count) {
  CLI::Option* option = c->add_option_function<std::string>(
      "--streamed-layers",
      [&count](const std::string& text) {
        if (text == "auto") {
          count = kAutoStreamedLayers;
          return;
        }
        int64_t n = -1;
        const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (status != std::errc() || end != text.data() + text.size() || n < 0)
          throw CLI::ValidationError("--streamed-layers",
                                     fmt::format("'{}' is not a layer count (expected auto or 0 to the model's "
                                                 "decoder layers)", text));
        count = n;
      },
      "Keep the last N decoder layers' weights in pinned host memory, copied in one layer ahead (CUDA); auto "
      "(default): none where the weights fit the budget beside a step, else the fewest that make room "
      "('mosaic plan --weights auto' names N for a given length)");
  return option->default_str("auto");
}

}  // namespace mosaic::cli
