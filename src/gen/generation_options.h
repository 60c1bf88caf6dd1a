// Validation and names for the generation options (the struct itself is public:
// include/mosaic/generation_options.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/step_limits.h"
#include "model/config.h"
#include "mosaic/generation_options.h"

namespace mosaic {

std::string_view remasking_name(Remasking remasking);
std::string_view dream_alg_name(DreamAlg alg);
std::optional<Remasking> parse_remasking(std::string_view name);
std::optional<DreamAlg> parse_dream_alg(std::string_view name);
std::string_view cache_mode_name(CacheMode mode);  // "auto", "none", "prefix", "dual", "block"
// The modes a request may ask for: auto, none, prefix, dual.
std::optional<CacheMode> parse_cache_mode(std::string_view name);

// The smallest temperature above 0 that is accepted: 1 / T multiplies the logits, and below this the
// Gumbel-max arithmetic loses the logits to overflow (vLLM's sampler treats T < 1e-5 as greedy;
// Mosaic refuses it rather than guess).
inline constexpr double kMinTemperature = 1e-5;
// The largest classifier-free guidance scale: (scale + 1) multiplies logit differences in fp32.
inline constexpr double kMaxCfgScale = 1e6;

// Checks the options against the family and fills what depends on the model (block length,
// eos, the cache mode used). Throws mosaic::Error naming the option: steps not divisible by
// blocks, a block longer than the generation, an option of the other family set away from its
// default, out-of-range values, a cache mode the model cannot use.
void validate_generation_options(const ModelConfig& config, GenerationOptions& options);

// What depends on the prompt as well (BlockAttention::absolute: the number of blocks is that of
// the grid blocks the generation meets). `options` must have passed validate_generation_options.
void validate_for_prompt(const ModelConfig& config, int64_t prompt_length, const GenerationOptions& options);

// Whether a request with these (validated) options can infill: generate between its prompt and
// `suffix_length` tokens after the generated region (docs/design/infilling.md). Only full
// attention without a KV cache or CFG: a block-causal model's generated blocks never see the
// suffix, the prefix and dual caches are approximations defined for nothing after the
// generation, and CFG's unconditional canvas masks the prompt only. Throws OptionError
// ("suffix") naming what is in the way.
void validate_suffix(const ModelConfig& config, const GenerationOptions& options, int64_t suffix_length);

// Whether a request with these (validated) options decodes in blocks: every LLaDA request, and
// Dream with a block length, a cache, or a block-causal model (cached-decoding.md §2).
bool decodes_in_blocks(const ModelConfig& config, const GenerationOptions& options);

// The request's block layout for a prompt of `prompt_length` tokens (kind: the model's).
BlockLayout block_layout(const ModelConfig& config, int64_t prompt_length, const GenerationOptions& options);

}  // namespace mosaic
