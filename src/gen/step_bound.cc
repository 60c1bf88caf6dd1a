#include "gen/step_bound.h"

namespace mosaic {

StepBound step_bound(const ModelConfig& config, int64_t prompt_tokens, const GenerationOptions& options) {
  StepBound bound;
  bound.tokens = prompt_tokens + options.gen_length;
  if (config.family == Family::dream) {
    // Every masked position of the canvas may be a candidate.
    bound.candidates = options.gen_length;
    bound.logits = options.top_p.has_value() || options.top_k.has_value();
    return bound;
  }
  // LLaDA: candidates lie in the active block; CFG adds the unconditional canvas with the same rows.
  bound.candidates = options.block_length > 0 ? options.block_length : options.gen_length;
  if (options.cfg_scale > 0) {
    bound.tokens *= 2;
    bound.candidates *= 2;
    bound.logits = true;
  }
  return bound;
}

}  // namespace mosaic
