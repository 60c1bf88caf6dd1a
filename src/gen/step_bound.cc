#include "gen/step_bound.h"

#include <algorithm>

namespace mosaic {

StepBound step_bound(const ModelConfig& config, int64_t prompt_tokens, const GenerationOptions& options,
                     int64_t cache_page_rows) {
  StepBound bound;
  bound.tokens = prompt_tokens + options.gen_length;
  // A cache holds the whole canvas (and the unconditional canvas's, under CFG).
  if (options.cache != CacheMode::none) {
    bound.cached = true;
    bound.cache_pages = (bound.tokens + cache_page_rows - 1) / cache_page_rows;
  }
  if (options.d2f) {  // every created block may be active at once
    bound.candidates = options.gen_length;
    return bound;
  }
  if (config.family == Family::dream) {
    // Every masked position of the canvas may be a candidate (of the active block, in blocks).
    bound.candidates = options.block_length > 0 ? std::min(options.block_length, options.gen_length) : options.gen_length;
    bound.logits = options.top_p.has_value() || options.top_k.has_value();
    return bound;
  }
  // LLaDA: candidates lie in the active block; CFG adds the unconditional canvas with the same rows.
  bound.candidates = options.block_length > 0 ? std::min(options.block_length, options.gen_length) : options.gen_length;
  if (options.cfg_scale > 0) {
    bound.tokens *= 2;
    bound.candidates *= 2;
    bound.cache_pages *= 2;
    bound.logits = true;
  }
  return bound;
}

}  // namespace mosaic
