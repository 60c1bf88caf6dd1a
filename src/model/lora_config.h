// adapter_config.json of a PEFT LoRA adapter, as PEFT saves it (docs/design/lora-adapters.md):
// the rank r, lora_alpha, rsLoRA, and which modules target_modules selects. Every field that would
// change the arithmetic in a way Mosaic does not reproduce (DoRA, trained biases, per-module ranks,
// layer selections, fully trained modules) is refused by name rather than ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace mosaic {

struct LoraConfig {
  int64_t rank = 0;      // r
  double alpha = 0;      // lora_alpha
  bool rslora = false;   // use_rslora: scaling alpha / sqrt(r) instead of alpha / r
  double scaling = 0;    // what B @ A is multiplied by; finite
  // target_modules, as a list (a module is targeted when its path equals an entry or ends with
  // "." + entry) or as one string (a regular expression the whole path must match).
  std::vector<std::string> target_names;
  std::optional<std::string> target_pattern;
  std::optional<std::regex> target_regex;  // target_pattern compiled

  // PEFT's rule (check_target_module_exists) for a module path such as
  // "model.transformer.blocks.0.q_proj".
  bool targets(std::string_view module) const;
};

// Reads the parsed adapter_config.json; throws mosaic::Error "<source>: <field> ..." naming the
// field and the value expected.
LoraConfig parse_lora_config(const nlohmann::json& root, std::string_view source);

}  // namespace mosaic
