#include "exec/step_runner.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/format_bytes.h"

#ifdef MOSAIC_HAVE_CUDA
#include "exec/cuda_executor.h"
#include "mem/cuda_arena.h"
#endif

namespace mosaic {

CpuStepRunner::CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget)
    : model_(model),
      budget_(activation_budget),
      logits_planner_(model.config(), {DType::f32, HeadMode::logits}),
      stats_planner_(model.config(), {DType::f32, HeadMode::stats}),
      executor_(model) {}

ChunkConfig CpuStepRunner::chunks_for(const StepShape& shape, HeadMode head) {
  if (!budget_) return {};
  // One search per bucket: the bucket's shape bounds every step that falls in it.
  const int64_t tokens = bucket_rows(shape.tokens());
  const int64_t candidates = std::min(bucket_rows(shape.total_candidates()), tokens);
  const auto key = std::make_tuple(tokens, candidates, static_cast<int>(head));
  if (const auto found = chunk_cache_.find(key); found != chunk_cache_.end()) return found->second;
  ChunkSearchRequest request;
  request.shape = StepShape{{tokens}, {candidates}};
  request.options = {DType::f32, head};
  request.activation_budget = *budget_;
  request.granule = 64 * 1024;
  const ChunkSearchResult result = search_chunks(model_.config(), request);
  if (!result.fits)
    fail("a step of {} tokens and {} candidate rows needs at least {} of activations; the budget "
         "leaves {}",
         shape.tokens(), shape.total_candidates(), format_bytes(result.floor), format_bytes(*budget_));
  return chunk_cache_.emplace(key, result.chunks).first->second;
}

StepOutput CpuStepRunner::run(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  StepShape shape;
  for (const SequenceRows& sequence : input.sequences) {
    shape.lengths.push_back(static_cast<int64_t>(sequence.ids.size()));
    shape.candidates.push_back(static_cast<int64_t>(sequence.rows.size()));
  }
  const HeadMode head = input.keep_logits ? HeadMode::logits : HeadMode::stats;
  std::lock_guard lock(mutex_);
  StepOutput out;
  out.chunks = chunks_for(shape, head);
  StepPlanner& planner = input.keep_logits ? logits_planner_ : stats_planner_;
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
  if (budget) {
    // The planner reserves 64 MiB beside weights and arena for cuBLASLt and the per-step index
    // and sampling buffers (PlanRequest::device "cuda"); keep at least that out of the arena.
    const uint64_t fixed = executor_->weight_bytes() + std::max<uint64_t>(executor_->workspace_bytes(), uint64_t{64} << 20);
    if (fixed >= *budget)
      fail("the weights and workspace ({}) alone exceed the budget of {}", format_bytes(fixed), format_bytes(*budget));
    activation_budget_ = *budget - fixed;
  }
}

CudaStepRunner::~CudaStepRunner() = default;

uint64_t CudaStepRunner::weight_bytes() const { return executor_->weight_bytes(); }

ChunkConfig CudaStepRunner::chunks_for(const StepShape& shape, HeadMode head) {
  if (!activation_budget_) return {};
  const int64_t tokens = bucket_rows(shape.tokens());
  const int64_t candidates = std::min(bucket_rows(shape.total_candidates()), tokens);
  const auto key = std::make_tuple(tokens, candidates, static_cast<int>(head));
  if (const auto found = chunk_cache_.find(key); found != chunk_cache_.end()) return found->second;
  ChunkSearchRequest request;
  request.shape = StepShape{{tokens}, {candidates}};
  request.options = head == HeadMode::logits ? logits_options_ : stats_options_;
  request.activation_budget = *activation_budget_;
  request.granule = arena_->granularity();
  const ChunkSearchResult result = search_chunks(model_.config(), request);
  if (!result.fits)
    fail("a step of {} tokens and {} candidate rows needs at least {} of activations; the budget "
         "leaves {}",
         shape.tokens(), shape.total_candidates(), format_bytes(result.floor), format_bytes(*activation_budget_));
  return chunk_cache_.emplace(key, result.chunks).first->second;
}

StepOutput CudaStepRunner::run(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  StepShape shape;
  for (const SequenceRows& sequence : input.sequences) {
    shape.lengths.push_back(static_cast<int64_t>(sequence.ids.size()));
    shape.candidates.push_back(static_cast<int64_t>(sequence.rows.size()));
  }
  const HeadMode head = input.keep_logits ? HeadMode::logits : HeadMode::stats;
  std::lock_guard lock(mutex_);
  StepOutput out;
  out.chunks = chunks_for(shape, head);
  StepPlanner& planner = input.keep_logits ? *logits_planner_ : *stats_planner_;
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
