// The generation loop: every step, each unfinished request says which positions it needs
// predicted; all of them run as one packed forward (step-level batching); each request then
// unmasks what its algorithm chooses. Requests never influence each other's results.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "exec/step_runner.h"
#include "gen/generation_options.h"
#include "gen/sequence_decoder.h"

namespace mosaic {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  GenerationOptions options;  // validated by generate()
};

struct StepEvent {
  int64_t request = 0;
  int64_t step = 0;                        // steps taken by this request so far
  std::span<const int32_t> canvas;         // prompt + generation region
  int64_t prompt_length = 0;
  std::span<const int32_t> committed;      // positions unmasked by this step
  int64_t masked_left = 0;
  bool finished = false;
  // The batched forward of this step (shared by all requests in it).
  int64_t batch_sequences = 0, batch_tokens = 0, batch_candidates = 0;
  uint64_t planned_peak = 0;
};

// Return false to cancel the whole generation (results keep what was decoded so far).
using StepCallback = std::function<bool(const StepEvent&)>;

struct GenerationResult {
  std::vector<int32_t> canvas;  // prompt + generated region (mask ids where nothing was decoded)
  int64_t prompt_length = 0;
  int64_t steps = 0;            // steps taken
  int64_t forwards = 0;         // steps that needed a forward (NFE)
  bool stopped_at_eos = false;
  bool cancelled = false;
  std::vector<int64_t> tokens_per_step;
};

std::vector<GenerationResult> generate(const ModelConfig& config, StepRunner& runner,
                                       std::vector<GenerationRequest> requests,
                                       const StepCallback& on_step = {});

}  // namespace mosaic
