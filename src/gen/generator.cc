#include "gen/generator.h"

namespace mosaic {

std::vector<GenerationResult> generate(const ModelConfig& config, StepRunner& runner,
                                       std::vector<GenerationRequest> requests,
                                       const StepCallback& on_step) {
  BatchStepper stepper(config, runner);
  std::vector<int64_t> ids;  // every request is validated before the first step
  for (GenerationRequest& request : requests) ids.push_back(stepper.add(std::move(request)));
  bool cancelled = false;
  const StepObserver observe = [&](const StepEvent& event) {
    if (on_step && !on_step(event)) cancelled = true;
  };
  while (!cancelled && stepper.unfinished() > 0) stepper.step(observe);

  std::vector<GenerationResult> results;
  results.reserve(ids.size());
  for (const int64_t id : ids) {
    results.push_back(stepper.result(id));
    results.back().cancelled = cancelled && !stepper.finished(id);
  }
  return results;
}

}  // namespace mosaic
