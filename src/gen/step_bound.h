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
  int64_t tokens = 0;      // rows computed (a CFG request runs its canvas twice; a cached step's
                           // refresh computes its whole canvas)
  int64_t candidates = 0;  // rows whose prediction is computed
  bool logits = false;     // the step materialises logits (top-p / top-k, CFG) for the whole batch
  bool cached = false;     // some request decodes with a KV cache (its steps are cached steps)
  int64_t cache_pages = 0; // KV cache pages the requests hold from their first step to their end

  StepBound& operator+=(const StepBound& other) {
    tokens += other.tokens, candidates += other.candidates, logits = logits || other.logits;
    cached = cached || other.cached, cache_pages += other.cache_pages;
    return *this;
  }
};

// `options` must have passed validate_generation_options for `config`; `cache_page_rows`: the
// positions a KV cache page of the runner holds.
StepBound step_bound(const ModelConfig& config, int64_t prompt_tokens, const GenerationOptions& options,
                     int64_t cache_page_rows);

}  // namespace mosaic
