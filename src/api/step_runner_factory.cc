#include "api/step_runner_factory.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/format_bytes.h"
#include "core/log.h"
#include "core/printable.h"
#include "graph/weight_staging.h"
#include "mem/host_memory.h"
#include "model/tensor_parallel.h"
#include "mosaic/plan.h"
#ifdef MOSAIC_HAVE_CUDA
#include "backend/cuda/attention.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_route_grouped.h"
#include "mem/cuda_arena.h"
#endif

namespace mosaic {

#ifdef MOSAIC_HAVE_CUDA
namespace {

// Why the CUDA backend cannot run a model, as the refusal (--device cuda) and the warning
// (--device auto) say it; nothing when it can.
struct CudaShapeLimit {
  std::string refusal, warning;
};

std::optional<CudaShapeLimit> cuda_shape_limit(const ModelConfig& config) {
  // The expert kernels' limits (backend/cuda/moe.h); LLaDA-MoE has 64 experts, 8 per token.
  if (config.experts > cuda::kMoeMaxExperts || config.experts_per_token > cuda::kMoeMaxExpertsPerToken)
    return CudaShapeLimit{
        fmt::format("{} experts ({} per token) cannot run on CUDA (its expert kernels take up to {}, {} per token)",
                    config.experts, config.experts_per_token, cuda::kMoeMaxExperts, cuda::kMoeMaxExpertsPerToken),
        fmt::format("{} experts have no CUDA kernels (up to {})", config.experts, cuda::kMoeMaxExperts)};
  if (config.router == RouterKind::sigmoid_grouped && config.router_groups > cuda::kMoeMaxRouterGroups)
    return CudaShapeLimit{
        fmt::format("a router of {} expert groups cannot run on CUDA (its routing kernel takes up to {})",
                    config.router_groups, cuda::kMoeMaxRouterGroups),
        fmt::format("{} router groups have no CUDA kernel (up to {})", config.router_groups, cuda::kMoeMaxRouterGroups)};
  if (!cuda::attention_supports_head_dim(config.head_dim))
    return CudaShapeLimit{
        fmt::format("head_dim {} cannot run on CUDA (its attention kernels take head_dim up to {})", config.head_dim,
                    cuda::kAttentionMaxHeadDim),
        fmt::format("head_dim {} has no CUDA attention kernel (up to {})", config.head_dim,
                    cuda::kAttentionMaxHeadDim)};
  return std::nullopt;
}

// kAutoStreamedLayers on CUDA: the fewest last layers with which a step of the reference length
// (prompt half, candidates half: the measuring shape) fits `budget`, by the plan's own search
// (`mosaic plan --weights auto`); every layer where none does (the most room: the step is then
// chunked or refused by name, as any step). A model whose weights and a short step fit resident
// streams nothing. docs/design/weight-staging.md, "Choosing the count".
int64_t auto_streamed_layers(const Model& model, const EngineOptions& options, uint64_t budget) {
  const ModelConfig& config = model.config();
  if (config.experts > 0) return 0;  // the CUDA executor streams dense layers only
  int64_t tokens = options.auto_stream_tokens;
  if (tokens <= 0) tokens = config.max_position > 0 ? std::min<int64_t>(config.max_position, 4096) : 4096;
  tokens = std::max<int64_t>(tokens, 2);
  PlanRequest request;
  // Absolute: a folder named like a preset ("llada-8b") is still this folder.
  request.model = std::filesystem::absolute(model.checkpoint().dir()).string();
  request.lengths = {tokens}, request.candidates = {tokens / 2};
  request.device = "cuda", request.budget = budget, request.weights = "auto";
  if (options.adapter) request.adapter = options.adapter->string();
  int64_t count = config.layers;
  try {
    count = plan_step(request).streamed_layers;
  } catch (const Error&) {
    // No placement fits a step of that length: stream everything, the most room there is.
  }
  if (count > 0)
    log(LogLevel::info, "streaming the last {} of {} layers' weights from pinned host memory: with every weight "
        "on the device a {}-token step does not fit the budget of {} in chunks that fill the GPU", count,
        config.layers, tokens, format_bytes(budget));
  return count;
}

}  // namespace
#endif

BackendChoice make_step_runner(const Model& model, const EngineOptions& options) {
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    fail("device '{}' is not supported (expected auto, cpu or cuda)", options.device);
  const bool auto_streamed = options.streamed_layers == kAutoStreamedLayers;
  // A count is checked whatever the backend; auto resolves on CUDA below (the CPU streams nothing).
  std::vector<int32_t> streamed = last_layers(model.config(), auto_streamed ? 0 : options.streamed_layers);
#ifdef MOSAIC_HAVE_CUDA
  const bool gpu_visible = cuda_devices_visible();
  // A shape the CUDA kernels do not take: refused on "cuda", the CPU on "auto".
  const std::optional<CudaShapeLimit> limit = cuda_shape_limit(model.config());
  const bool cuda_runs_it = !limit.has_value();
  if (gpu_visible && limit) {
    const std::string model_dir = printable_path(model.checkpoint().dir());
    if (options.device == "cuda") fail("{}: {}; use --device cpu", model_dir, limit->refusal);
    if (options.device == "auto") log(LogLevel::warn, "{}: {}: running on the CPU", model_dir, limit->warning);
  }
#else
  const bool gpu_visible = false, cuda_runs_it = false;
#endif
  if (options.tensor_parallel < 1)
    fail("--tensor-parallel {}: the rank count must be at least 1", options.tensor_parallel);
  if (options.context_parallel < 1)
    fail("--context-parallel {}: the rank count must be at least 1", options.context_parallel);
  const bool on_cuda = options.device == "cuda" || (options.device == "auto" && gpu_visible && cuda_runs_it);
  if (on_cuda && (options.tensor_parallel > 1 || options.context_parallel > 1))
    fail("--{}-parallel {} on CUDA: the NCCL ranks are not built yet; --device cpu runs the ranks as threads",
         options.tensor_parallel > 1 ? "tensor" : "context", std::max(options.tensor_parallel, options.context_parallel));
  if (on_cuda) {
#ifdef MOSAIC_HAVE_CUDA
    if (!gpu_visible) fail("--device cuda: no CUDA device is visible");
    // No budget: the device memory free before the weights are uploaded, so that a step larger
    // than the GPU is chunked or refused by the plan rather than failing to map.
    const uint64_t budget = options.budget ? *options.budget : cuda_free_memory_bytes(options.cuda_device);
    if (auto_streamed) streamed = last_layers(model.config(), auto_streamed_layers(model, options, budget));
    auto runner = std::make_unique<CudaStepRunner>(model, options.cuda_device, budget, streamed);
    const StepMemorySetup memory = runner->memory_setup();
    const uint64_t device_weights = runner->weight_bytes(), host_weights = runner->streamed_weight_bytes();
    return {std::move(runner), "cuda", memory, budget, device_weights, host_weights, std::ssize(streamed)};
#else
    fail("--device cuda: this Mosaic was built without CUDA");
#endif
  }
  // The CPU's weights are in host memory already: nothing to stream.
  if (!streamed.empty()) {
    if (options.device == "cpu")
      fail("streamed layers {}: the CPU backend holds every weight in host memory already (streaming applies to "
           "--device cuda)", options.streamed_layers);
    log(LogLevel::warn, "streamed layers {}: running on the CPU, which holds every weight in host memory already",
        options.streamed_layers);
  }
  // No budget: the machine's memory (RAM, or the cgroup's limit), shared by the ranks. A budget is
  // each rank's, beside its shard of the weights.
  const int64_t tensor_ranks = options.tensor_parallel, ranks = tensor_ranks * options.context_parallel;
  const uint64_t weights = tensor_ranks == 1 ? model.weights().bytes : tensor_parallel_rank_bytes(model, tensor_ranks);
  const uint64_t budget = options.budget ? *options.budget : host_memory_bytes() / static_cast<uint64_t>(ranks);
  if (budget <= weights) {
    if (options.budget)
      fail("the weights ({}{}) alone exceed the budget of {}", format_bytes(weights),
           ranks > 1 ? fmt::format(" a rank, of {} ranks", ranks) : std::string(), format_bytes(budget));
    fail("the weights ({}) alone exceed this machine's memory ({}); pass --budget to run anyway",
         format_bytes(weights), format_bytes(budget));
  }
  auto runner = std::make_unique<CpuStepRunner>(model, budget - weights, CpuStepRunner::kCpuCachePageRows, tensor_ranks,
                                                options.context_parallel);
  const StepMemorySetup memory = runner->memory_setup();
  return {std::move(runner), "cpu", memory, budget, weights, 0, 0};
}

}  // namespace mosaic
