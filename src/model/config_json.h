// Writes a ModelConfig back as the config.json its family's checkpoints ship, with the full
// field set of the released LLaDA-8B and Dream-v0-7B configs (used by make-test-model).
#pragma once

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace mosaic {

nlohmann::ordered_json model_config_to_json(const ModelConfig& config);

}  // namespace mosaic
