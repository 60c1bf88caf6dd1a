#include "api/step_runner_factory.h"

#include "core/error.h"
#include "core/format_bytes.h"
#include "core/log.h"
#include "core/printable.h"
#include "mem/host_memory.h"
#ifdef MOSAIC_HAVE_CUDA
#include "backend/cuda/attention.h"
#include "backend/cuda/moe.h"
#include "mem/cuda_arena.h"
#endif

namespace mosaic {

BackendChoice make_step_runner(const Model& model, const EngineOptions& options) {
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    fail("device '{}' is not supported (expected auto, cpu or cuda)", options.device);
#ifdef MOSAIC_HAVE_CUDA
  const bool gpu_visible = cuda_devices_visible();
  // A head dimension the CUDA attention kernels do not take: refused on "cuda", the CPU on "auto".
  const int64_t head_dim = model.config().head_dim;
  // The CUDA expert kernels' limits (backend/cuda/moe.h); LLaDA-MoE has 64 experts, 8 per token.
  const ModelConfig& config = model.config();
  const bool cuda_runs_family = config.experts <= cuda::kMoeMaxExperts && config.experts_per_token <= cuda::kMoeMaxExpertsPerToken;
  if (gpu_visible && !cuda_runs_family) {
    if (options.device == "cuda")
      fail("{}: {} experts ({} per token) cannot run on CUDA (its expert kernels take up to {}, {} per token); use "
           "--device cpu",
           printable_path(model.checkpoint().dir()), config.experts, config.experts_per_token, cuda::kMoeMaxExperts,
           cuda::kMoeMaxExpertsPerToken);
    if (options.device == "auto")
      log(LogLevel::warn, "{}: {} experts have no CUDA kernels (up to {}): running on the CPU",
          printable_path(model.checkpoint().dir()), config.experts, cuda::kMoeMaxExperts);
  }
  const bool cuda_runs_it = cuda_runs_family && cuda::attention_supports_head_dim(head_dim);
  if (gpu_visible && cuda_runs_family && !cuda_runs_it) {
    if (options.device == "cuda")
      fail("{}: head_dim {} cannot run on CUDA (its attention kernels take head_dim up to {}); use --device cpu",
           printable_path(model.checkpoint().dir()), head_dim, cuda::kAttentionMaxHeadDim);
    if (options.device == "auto")
      log(LogLevel::warn, "{}: head_dim {} has no CUDA attention kernel (up to {}): running on the CPU",
          printable_path(model.checkpoint().dir()), head_dim, cuda::kAttentionMaxHeadDim);
  }
#else
  const bool gpu_visible = false, cuda_runs_it = false;
#endif
  if (options.device == "cuda" || (options.device == "auto" && gpu_visible && cuda_runs_it)) {
#ifdef MOSAIC_HAVE_CUDA
    if (!gpu_visible) fail("--device cuda: no CUDA device is visible");
    // No budget: the device memory free before the weights are uploaded, so that a step larger
    // than the GPU is chunked or refused by the plan rather than failing to map.
    const uint64_t budget = options.budget ? *options.budget : cuda_free_memory_bytes(options.cuda_device);
    auto runner = std::make_unique<CudaStepRunner>(model, options.cuda_device, budget);
    const StepMemorySetup memory = runner->memory_setup();
    return {std::move(runner), "cuda", memory, budget};
#else
    fail("--device cuda: this Mosaic was built without CUDA");
#endif
  }
  // No budget: the machine's memory (RAM, or the cgroup's limit).
  const uint64_t weights = model.weights().bytes;
  const uint64_t budget = options.budget ? *options.budget : host_memory_bytes();
  if (budget <= weights) {
    if (options.budget)
      fail("the weights ({}) alone exceed the budget of {}", format_bytes(weights), format_bytes(budget));
    fail("the weights ({}) alone exceed this machine's memory ({}); pass --budget to run anyway",
         format_bytes(weights), format_bytes(budget));
  }
  auto runner = std::make_unique<CpuStepRunner>(model, budget - weights);
  const StepMemorySetup memory = runner->memory_setup();
  return {std::move(runner), "cpu", memory, budget};
}

}  // namespace mosaic
