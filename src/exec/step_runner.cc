#include "exec/step_runner.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/format_bytes.h"
#include "plan/step_memory.h"

#ifdef MOSAIC_HAVE_CUDA
#include "exec/cuda_executor.h"
#include "mem/cuda_arena.h"
#endif

namespace mosaic {

namespace {
constexpr uint64_t kCpuGranule = 64 * 1024;  // the CPU arena's allocation unit
}  // namespace

CpuStepRunner::CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget)
    : model_(model),
      logits_planner_(model.config(), {DType::f32, HeadMode::logits}),
      stats_planner_(model.config(), {DType::f32, HeadMode::stats}),
      executor_(model),
      chunker_(model.config(), activation_budget, kCpuGranule) {}

StepMemorySetup CpuStepRunner::memory_setup() const {
  return {stats_planner_.options(), logits_planner_.options(), model_.weights().bytes, kCpuGranule};
}

StepOutput CpuStepRunner::run(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  const StepShape shape = step_shape_of(input.sequences);
  std::lock_guard lock(mutex_);
  StepOutput out;
  StepPlanner& planner = input.keep_logits ? logits_planner_ : stats_planner_;
  out.chunks = chunker_.chunks_for(shape, planner.options());
  const Graph graph = planner.instantiate(shape, out.chunks);
  const auto planned = planner.plan(graph);
  out.values = executor_.run(graph, *planned, arena_, packed,
                             input.keep_logits ? std::span<const HeadRowSampling>() : input.sampling);
  out.cols = input.keep_logits ? model_.config().vocab : int64_t{kHeadStatCount};
  out.planned_peak = planned->memory.planned_peak;
  out.lower_bound = planned->memory.lower_bound;
  out.average_live = planned->memory.average_live;
  out.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.arena_bytes = arena_.size();
  return out;
}

#ifdef MOSAIC_HAVE_CUDA

CudaStepRunner::CudaStepRunner(const Model& model, int device, std::optional<uint64_t> budget)
    : model_(model),
      executor_(std::make_unique<CudaExecutor>(model, device)),
      arena_(make_cuda_arena(device)) {
  const uint64_t scratch = CudaExecutor::head_scratch_per_row(model.config().vocab);
  logits_options_ = {DType::bf16, HeadMode::logits, 0};
  stats_options_ = {DType::bf16, HeadMode::stats, scratch};
  logits_planner_ = std::make_unique<StepPlanner>(model.config(), logits_options_);
  stats_planner_ = std::make_unique<StepPlanner>(model.config(), stats_options_);
  fixed_bytes_ = executor_->weight_bytes() + std::max(executor_->workspace_bytes(), kCudaWorkspaceReserveBytes);
  std::optional<uint64_t> activation_budget;
  if (budget) {
    if (fixed_bytes_ >= *budget)
      fail("the weights and workspace ({}) alone exceed the budget of {}", format_bytes(fixed_bytes_),
           format_bytes(*budget));
    activation_budget = *budget - fixed_bytes_;
  }
  chunker_ = std::make_unique<StepChunker>(model.config(), activation_budget, arena_->granularity());
}

CudaStepRunner::~CudaStepRunner() = default;

uint64_t CudaStepRunner::weight_bytes() const { return executor_->weight_bytes(); }

StepMemorySetup CudaStepRunner::memory_setup() const {
  return {stats_options_, logits_options_, fixed_bytes_, arena_->granularity()};
}

StepOutput CudaStepRunner::run(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  const StepShape shape = step_shape_of(input.sequences);
  std::lock_guard lock(mutex_);
  StepOutput out;
  StepPlanner& planner = input.keep_logits ? *logits_planner_ : *stats_planner_;
  out.chunks = chunker_->chunks_for(shape, planner.options());
  const Graph graph = planner.instantiate(shape, out.chunks);
  const auto planned = planner.plan(graph);
  if (!arena_->prepare_step(planned->plan.peak_bytes))
    fail("the GPU is out of memory for a step of {} tokens: its plan needs {} of activations",
         shape.tokens(), format_bytes(planned->plan.peak_bytes));
  out.values = executor_->run(graph, *planned, *arena_, packed,
                              input.keep_logits ? std::span<const HeadRowSampling>() : input.sampling);
  out.cols = input.keep_logits ? model_.config().vocab : int64_t{kHeadStatCount};
  out.planned_peak = planned->memory.planned_peak;
  out.lower_bound = planned->memory.lower_bound;
  out.average_live = planned->memory.average_live;
  out.host_seconds = std::chrono::duration<double>(executor_->last_launch_end() - start).count();
  out.arena_bytes = arena_->mapped();
  return out;
}

#endif

}  // namespace mosaic
