#include "model/lora_config.h"

#include <cmath>

#include "core/error.h"
#include "core/log.h"

namespace mosaic {
namespace {

using nlohmann::json;

// The field's value, or nullptr when it is absent or null (PEFT writes null for unset options).
const json* field(const json& root, const char* name) {
  const auto it = root.find(name);
  return it == root.end() || it->is_null() ? nullptr : &*it;
}

bool bool_field(const json& root, const char* name, std::string_view source) {
  const json* value = field(root, name);
  if (value == nullptr) return false;
  if (!value->is_boolean()) fail("{}: '{}' must be true or false, got {}", source, name, value->dump());
  return value->get<bool>();
}

// Options whose presence changes which weights LoRA touches, or how: refused unless empty.
void refuse_if_set(const json& root, const char* name, std::string_view source, std::string_view why) {
  const json* value = field(root, name);
  if (value == nullptr) return;
  if ((value->is_object() || value->is_array() || value->is_string()) && value->empty()) return;
  fail("{}: '{}' is {}; {} (Mosaic applies one r and one lora_alpha to every targeted projection)", source,
       name, value->dump(), why);
}

}  // namespace

bool LoraConfig::targets(std::string_view module) const {
  if (target_regex) return std::regex_match(module.begin(), module.end(), *target_regex);
  for (const std::string& name : target_names) {
    if (module == name) return true;
    if (module.size() > name.size() && module.ends_with(name) && module[module.size() - name.size() - 1] == '.')
      return true;
  }
  return false;
}

LoraConfig parse_lora_config(const json& root, std::string_view source) {
  if (!root.is_object()) fail("{}: expected a JSON object (a PEFT adapter_config.json)", source);
  LoraConfig config;

  if (const json* type = field(root, "peft_type"); type && !(type->is_string() && type->get<std::string>() == "LORA"))
    fail("{}: 'peft_type' is {}; Mosaic reads LoRA adapters (\"LORA\")", source, type->dump());

  const json* rank = field(root, "r");
  if (rank == nullptr) fail("{}: missing 'r' (the LoRA rank, a positive integer)", source);
  if (!rank->is_number_integer() || rank->get<int64_t>() <= 0)
    fail("{}: 'r' must be a positive integer (the LoRA rank), got {}", source, rank->dump());
  config.rank = rank->get<int64_t>();

  const json* alpha = field(root, "lora_alpha");
  if (alpha == nullptr) fail("{}: missing 'lora_alpha' (a number; scaling is lora_alpha / r)", source);
  if (!alpha->is_number()) fail("{}: 'lora_alpha' must be a number, got {}", source, alpha->dump());
  config.alpha = alpha->get<double>();

  config.rslora = bool_field(root, "use_rslora", source);
  config.scaling = config.rslora ? config.alpha / std::sqrt(static_cast<double>(config.rank))
                                 : config.alpha / static_cast<double>(config.rank);
  if (!std::isfinite(config.scaling) || !std::isfinite(static_cast<float>(config.scaling)))
    fail("{}: 'lora_alpha' {} with r {} gives the scaling {}, which is not a finite fp32 number", source,
         alpha->dump(), config.rank, config.scaling);

  if (bool_field(root, "use_dora", source))
    fail("{}: 'use_dora' is true; DoRA adapters are not supported (only plain LoRA: use_dora false)", source);
  if (const json* bias = field(root, "bias"); bias && !(bias->is_string() && bias->get<std::string>() == "none"))
    fail("{}: 'bias' is {}; only \"none\" is supported (an adapter that trains biases changes more than W)",
         source, bias->dump());
  if (bool_field(root, "lora_bias", source))
    fail("{}: 'lora_bias' is true; LoRA B biases are not supported (expected false)", source);
  // PEFT itself resets fan_in_fan_out to false for torch.nn.Linear targets (with a warning), and
  // every projection of LLaDA and Dream is one: A and B are read in nn.Linear layout either way.
  if (bool_field(root, "fan_in_fan_out", source))
    log(LogLevel::warn, "{}: 'fan_in_fan_out' is true, but the targets are nn.Linear layers; read as false, as PEFT does",
        source);
  refuse_if_set(root, "rank_pattern", source, "per-module ranks are not supported");
  refuse_if_set(root, "alpha_pattern", source, "per-module alphas are not supported");
  refuse_if_set(root, "layers_to_transform", source, "selecting layers is not supported");
  refuse_if_set(root, "layers_pattern", source, "selecting layers is not supported");
  refuse_if_set(root, "modules_to_save", source, "fully trained modules are not supported");
  refuse_if_set(root, "exclude_modules", source, "excluding modules is not supported");
  refuse_if_set(root, "trainable_token_indices", source, "trained token embeddings are not supported");
  refuse_if_set(root, "layer_replication", source, "layer replication is not supported");

  const json* targets = field(root, "target_modules");
  if (targets == nullptr)
    fail("{}: missing 'target_modules' (a list of module names, or a regular expression)", source);
  if (targets->is_string()) {
    config.target_pattern = targets->get<std::string>();
    try {
      config.target_regex.emplace(*config.target_pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& error) {
      fail("{}: 'target_modules' {} is not a valid regular expression: {}", source, targets->dump(), error.what());
    }
  } else if (targets->is_array() && !targets->empty()) {
    for (const json& name : *targets) {
      if (!name.is_string() || name.get<std::string>().empty())
        fail("{}: 'target_modules' entries must be module names, got {}", source, name.dump());
      config.target_names.push_back(name.get<std::string>());
    }
  } else {
    fail("{}: 'target_modules' must be a non-empty list of module names or a regular expression, got {}", source,
         targets->dump());
  }
  return config;
}

}  // namespace mosaic
