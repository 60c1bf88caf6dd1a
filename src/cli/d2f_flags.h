// --d2f and its three thresholds (docs/design/d2f-decoding.md), the same flags in `generate`,
// `serve` and `bench generate`: registered once here, and a threshold given without --d2f is an
// error naming it.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "mosaic/generation_options.h"

namespace mosaic::cli {

struct D2fFlags {
  bool enabled = false;
  D2fOptions options;
  std::vector<CLI::Option*> thresholds;

  // `help`: what --d2f does in this command; `prefix` heads each threshold's help ("D2F: ").
  void add_to(CLI::App* c, const std::string& help, const std::string& prefix) {
    c->add_flag("--d2f", enabled, help);
    thresholds = {
        c->add_option("--block-add-threshold", options.block_add_threshold, prefix + "add a block once the last is this decoded")
            ->default_val(options.block_add_threshold),
        c->add_option("--decoded-token-threshold", options.decoded_token_threshold,
                      prefix + "fully activate the next block once one is this decoded")
            ->default_val(options.decoded_token_threshold),
        c->add_option("--skip-threshold", options.skip_threshold, prefix + "accept tokens more confident than this")
            ->default_val(options.skip_threshold)};
  }

  // The options when --d2f was given, else nullopt; throws for a threshold given without it.
  std::optional<D2fOptions> resolve() const {
    for (const CLI::Option* option : thresholds)
      if (option->count() > 0 && !enabled) fail("{} is an option of D2F decoding: add --d2f", option->get_name());
    return enabled ? std::optional<D2fOptions>(options) : std::nullopt;
  }
};

}  // namespace mosaic::cli
