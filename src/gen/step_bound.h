// The largest denoising step a request can ever ask for: tokens in the packed forward, candidate
// rows, and whether the step keeps its logits. A batch's steps never exceed the sum of its
// requests' bounds, so admitting a request when the summed bound fits the memory budget means no
// later step of the batch can fail for memory.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "mosaic/generation_options.h"

namespace mosaic {

struct StepBound {
  int64_t tokens = 0;      // canvas tokens (a CFG request runs its canvas twice)
  int64_t candidates = 0;  // rows whose prediction is computed
  bool logits = false;     // the step materialises logits (top-p / top-k, CFG) for the whole batch

  StepBound& operator+=(const StepBound& other) {
    tokens += other.tokens, candidates += other.candidates, logits = logits || other.logits;
    return *this;
  }
};

// `options` must have passed validate_generation_options for `config`.
StepBound step_bound(const ModelConfig& config, int64_t prompt_tokens, const GenerationOptions& options);

}  // namespace mosaic
