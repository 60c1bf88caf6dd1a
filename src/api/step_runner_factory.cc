#include "api/step_runner_factory.h"

#include "core/error.h"
#include "core/format_bytes.h"
#include "mem/host_memory.h"
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
    return {std::move(runner), "cuda", memory, options.budget};
#else
    fail("--device cuda: this Mosaic was built without CUDA");
#endif
  }
  const uint64_t weights = model.weights().bytes;
  uint64_t budget = 0;
  if (options.budget) {
    budget = *options.budget;
    if (budget <= weights)
      fail("the weights ({}) alone exceed the budget of {}", format_bytes(weights), format_bytes(budget));
  } else {
    budget = host_memory_bytes();
    if (budget <= weights)
      fail("the weights ({}) alone exceed this machine's memory ({}); pass --budget to run anyway",
           format_bytes(weights), format_bytes(budget));
  }
  auto runner = std::make_unique<CpuStepRunner>(model, budget - weights);
  const StepMemorySetup memory = runner->memory_setup();
  return {std::move(runner), "cpu", memory, budget};
}

}  // namespace mosaic
