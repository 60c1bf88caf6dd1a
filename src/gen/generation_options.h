// Validation and names for the generation options (the struct itself is public:
// include/mosaic/generation_options.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/config.h"
#include "mosaic/generation_options.h"

namespace mosaic {

std::string_view remasking_name(Remasking remasking);
std::string_view dream_alg_name(DreamAlg alg);
std::optional<Remasking> parse_remasking(std::string_view name);
std::optional<DreamAlg> parse_dream_alg(std::string_view name);

// Checks the options against the family and fills what depends on the model (block length,
// eos). Throws mosaic::Error naming the option: steps not divisible by blocks, a block longer
// than the generation, an option of the other family set away from its default, out-of-range
// values.
void validate_generation_options(const ModelConfig& config, GenerationOptions& options);

}  // namespace mosaic
