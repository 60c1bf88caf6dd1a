#include "exec/step_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/format_bytes.h"
#include "plan/step_memory.h"

#ifdef MOSAIC_HAVE_CUDA
#include "exec/cuda_executor.h"
#include "exec/device_canvases.h"
#include "mem/cuda_arena.h"
#endif

namespace mosaic {

namespace {
constexpr uint64_t kCpuGranule = 64 * 1024;  // the CPU arena's allocation unit

// GraphOptions::last_layer_candidates_only: on, unless the environment says
// MOSAIC_LAST_LAYER_CANDIDATES_ONLY=0 (the same results; for A/B timing and the tests that compare
// the two forms).
bool last_layer_candidates_only_from_environment() {
  const char* setting = std::getenv("MOSAIC_LAST_LAYER_CANDIDATES_ONLY");
  return setting == nullptr || std::string_view(setting) != "0";
}

GraphOptions graph_options(DType activations, HeadMode head, uint64_t head_scratch_per_row = 0) {
  GraphOptions options;
  options.activations = activations, options.head = head;
  options.head_scratch_per_row = head_scratch_per_row;
  options.last_layer_candidates_only = last_layer_candidates_only_from_environment();
  return options;
}
}  // namespace

CpuStepRunner::CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget)
    : model_(model),
      logits_planner_(model.config(), graph_options(DType::f32, HeadMode::logits)),
      stats_planner_(model.config(), graph_options(DType::f32, HeadMode::stats)),
      executor_(model),
      chunker_(model.config(), activation_budget, kCpuGranule) {}

StepMemorySetup CpuStepRunner::memory_setup() const {
  return {stats_planner_.options(), logits_planner_.options(), model_.weights().bytes, kCpuGranule};
}

StepOutput CpuStepRunner::run(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  MOSAIC_ASSERT(std::ranges::none_of(input.device_commit, [](const auto& rule) { return rule.has_value(); }),
                "the CPU runner does not commit on the device");
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  const StepShape shape = step_shape_of(input.sequences);
  std::lock_guard lock(mutex_);
  StepOutput out;
  StepPlanner& planner = input.keep_logits ? logits_planner_ : stats_planner_;
  out.chunks = chunker_.chunks_for(shape, planner.options());
  out.last_layer_over_candidates = last_layer_over_candidates(planner.options(), out.chunks);
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
      canvases_(std::make_unique<DeviceCanvases>(executor_->stream())),
      arena_(make_cuda_arena(device)) {
  const uint64_t scratch = CudaExecutor::head_scratch_per_row(model.config().vocab);
  logits_options_ = graph_options(DType::bf16, HeadMode::logits);
  stats_options_ = graph_options(DType::bf16, HeadMode::stats, scratch);
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

void CudaStepRunner::release_canvas(uint64_t canvas_id) {
  std::lock_guard lock(mutex_);
  canvases_->release(canvas_id);
}

std::vector<int32_t> CudaStepRunner::resident_canvas(uint64_t canvas_id) {
  std::lock_guard lock(mutex_);
  return canvases_->download(canvas_id);
}

int64_t CudaStepRunner::canvas_uploads() {
  std::lock_guard lock(mutex_);
  return canvases_->uploads();
}

size_t CudaStepRunner::graph_replays() {
  std::lock_guard lock(mutex_);
  return executor_->graph_replays();
}

StepOutput CudaStepRunner::run(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  const PackedBatch packed = pack_batch(model_.config(), input.sequences);
  const StepShape shape = step_shape_of(input.sequences);
  const size_t sequences = input.sequences.size();
  MOSAIC_ASSERT(input.device_commit.empty() || input.device_commit.size() == sequences,
                "one device-commit entry per sequence");
  std::lock_guard lock(mutex_);
  StepOutput out;
  StepPlanner& planner = input.keep_logits ? *logits_planner_ : *stats_planner_;
  out.chunks = chunker_->chunks_for(shape, planner.options());
  out.last_layer_over_candidates = last_layer_over_candidates(planner.options(), out.chunks);
  const Graph graph = planner.instantiate(shape, out.chunks);
  const auto planned = planner.plan(graph);
  if (!arena_->prepare_step(planned->plan.peak_bytes))
    fail("the GPU is out of memory for a step of {} tokens: its plan needs {} of activations",
         shape.tokens(), format_bytes(planned->plan.peak_bytes));

  // Resident canvases feed the step's ids; committing sequences are unmasked into theirs.
  std::vector<int32_t*> canvases(sequences, nullptr);
  std::vector<cuda::CommitSequence> commits;
  std::vector<size_t> committing;  // the sequence of each commit
  bool host_needs_rows = input.keep_logits;
  int64_t row = 0;
  for (size_t s = 0; s < sequences; ++s) {
    const SequenceRows& sequence = input.sequences[s];
    if (sequence.canvas_id != 0) canvases[s] = canvases_->hold(sequence.canvas_id, sequence.ids);
    const int64_t rows = static_cast<int64_t>(sequence.rows.size());
    if (!input.device_commit.empty() && input.device_commit[s]) {
      MOSAIC_ASSERT(!input.keep_logits && canvases[s] != nullptr,
                    "a device commit needs the fused head and the sequence's canvas id");
      commits.push_back({row, rows, canvases[s], *input.device_commit[s]});
      committing.push_back(s);
    } else {
      host_needs_rows = host_needs_rows || rows > 0;
    }
    row += rows;
  }
  DeviceStepIo io;
  if (std::ranges::any_of(canvases, [](const int32_t* canvas) { return canvas != nullptr; })) io.canvases = canvases;
  io.commits = commits;
  io.copy_output = host_needs_rows;
  CudaStepResult result = executor_->run(graph, *planned, *arena_, packed,
                                         input.keep_logits ? std::span<const HeadRowSampling>() : input.sampling, io);
  for (size_t c = 0; c < commits.size(); ++c) {
    const SequenceRows& sequence = input.sequences[committing[c]];
    canvases_->record_commit(sequence.canvas_id, sequence.rows,
                             std::span<const CommittedRow>(result.committed)
                                 .subspan(static_cast<size_t>(commits[c].row_begin), sequence.rows.size()));
  }
  out.values = std::move(result.values);
  out.committed = std::move(result.committed);
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
