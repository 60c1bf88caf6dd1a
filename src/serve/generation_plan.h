// From a parsed request to what the scheduler runs: the prompt and suffix as token ids and, per
// choice, options resolved for the model. What depends on the prompt's length is decided here:
// max_tokens left out is the context the prompt leaves (at most the server's default), the
// context is checked against the field actually at fault (the prompt, or the max_tokens that was
// sent), steps left out follow the length, and a temperature above 0 without a seed gets a
// random one. Every failure is an ApiError naming the request's own field
// (docs/design/openai-surface.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mosaic/engine.h"
#include "serve/api_request.h"

namespace mosaic::serve {

struct GenerationPlan {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> suffix_ids;
  std::vector<GenerationOptions> choices;  // resolved; choice i runs with the request's seed + i
  std::string prompt_param;                // "prompt" or "messages": what errors about it name
};

// `random_seed` is called once, when the request samples (temperature > 0) without a seed.
GenerationPlan plan_generation(const Engine& engine, const ApiRequest& request, const RequestLimits& limits,
                               bool allow_long_context, uint64_t (*random_seed)());

// A seed from the operating system's entropy, below 2^63 (a JSON integer every client reads).
uint64_t operating_system_seed();

}  // namespace mosaic::serve
