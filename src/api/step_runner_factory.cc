#include "api/step_runner_factory.h"

#include "core/error.h"
#include "core/format_bytes.h"
#ifdef MOSAIC_HAVE_CUDA
#include "mem/cuda_arena.h"
#endif

namespace mosaic {

BackendChoice make_step_runner(const Model& model, const EngineOptions& options) {
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    fail("device '{}' is not supported (expected auto, cpu or cuda)", options.device);
#ifdef MOSAIC_HAVE_CUDA
  const bool gpu_visible = cuda_devices_visible();
#else
  const bool gpu_visible = false;
#endif
  if (options.device == "cuda" || (options.device == "auto" && gpu_visible)) {
#ifdef MOSAIC_HAVE_CUDA
    if (!gpu_visible) fail("--device cuda: no CUDA device is visible");
    auto runner = std::make_unique<CudaStepRunner>(model, options.cuda_device, options.budget);
    const StepMemorySetup memory = runner->memory_setup();
    return {std::move(runner), "cuda", memory};
#else
    fail("--device cuda: this Mosaic was built without CUDA");
#endif
  }
  std::optional<uint64_t> activation_budget;
  if (options.budget) {
    const uint64_t weights = model.weights().bytes;
    if (*options.budget <= weights)
      fail("the weights ({}) alone exceed the budget of {}", format_bytes(weights), format_bytes(*options.budget));
    activation_budget = *options.budget - weights;
  }
  auto runner = std::make_unique<CpuStepRunner>(model, activation_budget);
  const StepMemorySetup memory = runner->memory_setup();
  return {std::move(runner), "cpu", memory};
}

}  // namespace mosaic
