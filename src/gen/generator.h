// The generation loop: every step, each unfinished request says which positions it needs
// predicted; all of them run as one packed forward (step-level batching); each request then
// unmasks what its algorithm chooses. Requests never influence each other's results. This is
// BatchStepper (gen/batch_stepper.h) run until every request has finished.
#pragma once

#include <functional>
#include <vector>

#include "exec/step_runner.h"
#include "gen/batch_stepper.h"

namespace mosaic {

// Return false to cancel the whole generation (results keep what was decoded so far).
using StepCallback = std::function<bool(const StepEvent&)>;

std::vector<GenerationResult> generate(const ModelConfig& config, StepRunner& runner,
                                       std::vector<GenerationRequest> requests,
                                       const StepCallback& on_step = {});

}  // namespace mosaic
