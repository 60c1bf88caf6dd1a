#include "exec/step_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/format_bytes.h"
#include "exec/context_parallel_batch.h"
#include "exec/kv_cache_views.h"
#include "exec/replay_padding.h"
#include "plan/step_memory.h"

#ifdef MOSAIC_HAVE_CUDA
#include "exec/cuda_executor.h"
#include "exec/device_canvases.h"
#include "mem/cuda_arena.h"
#include "mem/cuda_kv_cache.h"
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

GraphOptions graph_options(DType activations, HeadMode head, uint64_t head_scratch_per_row = 0,
                           int64_t tensor_parallel = 1, int64_t context_parallel = 1, int64_t context_rank = 0) {
  GraphOptions options;
  options.activations = activations, options.head = head;
  options.tensor_parallel = tensor_parallel;
  options.context_parallel = context_parallel, options.context_rank = context_rank;
  options.head_scratch_per_row = head_scratch_per_row;
  options.last_layer_candidates_only = last_layer_candidates_only_from_environment();
  return options;
}

// Whether a batch is a cached step: then every sequence must be (BatchStepper runs the others in a
// full step of their own).
bool cached_batch(std::span<const SequenceRows> sequences) {
  const bool cached = std::ranges::any_of(sequences, [](const SequenceRows& s) { return s.cached(); });
  MOSAIC_ASSERT(!cached || std::ranges::all_of(sequences, [](const SequenceRows& s) { return s.cached(); }),
                "a step is either cached for every sequence or for none");
  return cached;
}

// The step's memory figures, its sequences' cache included.
void report_memory(const PlannedStep& planned, const Graph& graph, StepOutput& out) {
  const StepMemory memory = with_resident(planned.memory, graph.resident_bytes());
  out.planned_peak = memory.planned_peak;
  out.lower_bound = memory.lower_bound;
  out.average_live = memory.average_live;
  out.resident = memory.resident;
}

// A runner's cache figures: its pool, the bytes of a page, the pages its memory covers and the
// bytes it holds; `room`: what the budget leaves the cache beside the weights (unset: no budget).
KvCacheStats cache_stats_of(const KvPagePool& pool, uint64_t page_bytes, int64_t pages_mapped, uint64_t bytes,
                            std::optional<uint64_t> room) {
  KvCacheStats stats;
  stats.page_rows = pool.page_rows();
  stats.page_bytes = page_bytes;
  stats.pages_used = pool.used();
  stats.pages_mapped = pages_mapped;
  stats.sequences = pool.sequences();
  stats.bytes = bytes;
  if (room)
    stats.pages_free = pool.free_below_high_water() +
                       static_cast<int64_t>((*room - std::min(*room, bytes)) / std::max<uint64_t>(page_bytes, 1));
  return stats;
}

// The error for a reservation the budget cannot take.
[[noreturn]] void refuse_cache(int64_t positions, int64_t pages, uint64_t needed, uint64_t held, uint64_t budget) {
  fail("the KV cache of a sequence of {} positions needs {} pages; the cache would grow to {} ({} held now), "
       "more than the {} the budget leaves beside the weights",
       positions, pages, format_bytes(needed), format_bytes(held), format_bytes(budget));
}

}  // namespace

uint64_t kv_cache_bytes(const StepMemorySetup& setup, int64_t layers, int64_t pages) {
  if (pages <= 0 || layers <= 0) return 0;
  const uint64_t region = setup.cache_page_bytes / static_cast<uint64_t>(2 * layers) * static_cast<uint64_t>(pages);
  const uint64_t granule = std::max<uint64_t>(setup.cache_region_granule, 1);
  return (region + granule - 1) / granule * granule * static_cast<uint64_t>(2 * layers);
}

struct CpuStepRunner::RankPlanners {
  RankPlanners(const ModelConfig& config, int64_t tensor_parallel, int64_t context_parallel, int64_t context_rank)
      : logits(config, graph_options(DType::f32, HeadMode::logits, 0, tensor_parallel, context_parallel, context_rank)),
        stats(config, graph_options(DType::f32, HeadMode::stats, 0, tensor_parallel, context_parallel, context_rank)) {}
  StepPlanner& of(bool keep_logits) { return keep_logits ? logits : stats; }
  StepPlanner logits, stats;
};

CpuStepRunner::CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget, int64_t cache_page_rows,
                             int64_t tensor_parallel, int64_t context_parallel)
    : model_(model),
      activation_budget_(activation_budget),
      ranks_(model, tensor_parallel, context_parallel, cache_page_rows),
      chunker_(model.config(), kCpuGranule),
      pages_(cache_page_rows) {
  for (int64_t r = 0; r < context_parallel; ++r)
    planners_.push_back(std::make_unique<RankPlanners>(model.config(), tensor_parallel, context_parallel, r));
}

CpuStepRunner::~CpuStepRunner() = default;

StepMemorySetup CpuStepRunner::memory_setup() const {
  // A rank's graphs (under context parallelism, given a batch's shape, rank 0's with every candidate
  // counted as its own: an upper bound).
  StepMemorySetup setup{planners_[0]->stats.options(), planners_[0]->logits.options(), ranks_.weight_bytes(),
                        kCpuGranule};
  setup.cache_page_rows = pages_.page_rows();
  setup.cache_page_bytes = ranks_.cache_page_bytes();
  setup.cache_region_granule = 1;
  return setup;
}

std::optional<uint64_t> CpuStepRunner::arena_budget() const {
  if (!activation_budget_) return std::nullopt;
  return *activation_budget_ - std::min(*activation_budget_, ranks_.cache_bytes());
}

uint64_t CpuStepRunner::reserve_cache(int64_t positions) {
  if (context_parallel())
    fail("--context-parallel {}: the KV cache is not supported with context parallelism yet (expected --cache none)",
         planners_.size());
  std::lock_guard lock(mutex_);
  const int64_t pages = pages_.pages_for(positions);
  const uint64_t needed = ranks_.cache_page_bytes() * static_cast<uint64_t>(pages_.high_water_after(pages));
  if (activation_budget_ && needed > *activation_budget_)
    refuse_cache(positions, pages, needed, ranks_.cache_bytes(), *activation_budget_);
  const uint64_t id = pages_.reserve(pages);
  try {
    ranks_.resize_caches(pages_.high_water());
  } catch (...) {
    pages_.release(id);
    throw;
  }
  return id;
}

void CpuStepRunner::release_cache(uint64_t id) {
  std::lock_guard lock(mutex_);
  pages_.release(id);
  ranks_.resize_caches(pages_.high_water());
}

KvCacheStats CpuStepRunner::cache_stats() const {
  std::lock_guard lock(mutex_);
  return cache_stats_of(pages_, ranks_.cache_page_bytes(), ranks_.cache_pages(), ranks_.cache_bytes(),
                        activation_budget_);
}

StepOutput CpuStepRunner::run(const StepInput& input) {
  MOSAIC_ASSERT(std::ranges::none_of(input.device_commit, [](const auto& rule) { return rule.has_value(); }),
                "the CPU runner does not commit on the device");
  if (context_parallel()) return run_context_parallel(input);
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& config = model_.config();
  PackedBatch packed = pack_batch(config, input.sequences);
  StepShape shape = step_shape_of(config, input.sequences);
  const bool cached = cached_batch(input.sequences);
  std::lock_guard lock(mutex_);
  if (cached) add_cache_views(pages_, input.sequences, shape, packed);
  StepOutput out;
  StepPlanner& planner = planners_[0]->of(input.keep_logits);
  out.chunks = chunker_.chunks_for(shape, planner.options(), arena_budget());
  out.last_layer_over_candidates = last_layer_over_candidates(planner.options(), out.chunks);
  const Graph graph = planner.instantiate(shape, out.chunks);
  const auto planned = planner.plan(graph);
  out.values = ranks_.run(graph, *planned, packed,
                          input.keep_logits ? std::span<const HeadRowSampling>() : input.sampling, cached);
  out.cols = input.keep_logits ? config.vocab : int64_t{kHeadStatCount};
  report_memory(*planned, graph, out);
  out.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.arena_bytes = ranks_.arena_bytes();
  return out;
}

// Each rank its rows and its candidates (exec/context_parallel_batch.h), one chunking for all
// (chosen for the rank with the most candidates: the ranks' graphs differ only there), every
// rank's predictions put back in the batch's order.
StepOutput CpuStepRunner::run_context_parallel(const StepInput& input) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& config = model_.config();
  MOSAIC_ASSERT(!cached_batch(input.sequences), "a cached step under context parallelism");
  const PackedBatch packed = pack_batch(config, input.sequences);
  const std::vector<ContextParallelPart> parts =
      split_for_context_parallel(step_shape_of(config, input.sequences), packed, ranks_.count());
  auto planner = [&](size_t r) -> StepPlanner& { return planners_[r]->of(input.keep_logits); };
  size_t widest = 0;
  for (size_t r = 0; r < parts.size(); ++r)
    if (parts[r].shape.total_candidates() > parts[widest].shape.total_candidates()) widest = r;
  std::lock_guard lock(mutex_);
  StepOutput out;
  out.chunks = chunker_.chunks_for(parts[widest].shape, planner(widest).options(), arena_budget());
  out.last_layer_over_candidates = last_layer_over_candidates(planner(widest).options(), out.chunks);
  std::vector<Graph> graphs;
  std::vector<std::shared_ptr<const PlannedStep>> planned;
  std::vector<std::vector<HeadRowSampling>> sampling(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    graphs.push_back(planner(r).instantiate(parts[r].shape, out.chunks));
    planned.push_back(planner(r).plan(graphs.back()));
    if (!input.keep_logits && !input.sampling.empty())
      for (const int64_t c : parts[r].candidates) sampling[r].push_back(input.sampling[static_cast<size_t>(c)]);
  }
  std::vector<CpuRankStep> steps;
  for (size_t r = 0; r < parts.size(); ++r) steps.push_back({&graphs[r], planned[r].get(), &parts[r].batch, sampling[r]});
  const std::vector<std::vector<float>> results = ranks_.run_parts(steps);
  out.cols = input.keep_logits ? config.vocab : int64_t{kHeadStatCount};
  const size_t cols = static_cast<size_t>(out.cols);
  out.values.resize(packed.logit_rows.size() * cols);
  for (size_t r = 0; r < parts.size(); ++r)
    for (size_t j = 0; j < parts[r].candidates.size(); ++j)
      std::copy_n(results[r].begin() + static_cast<std::ptrdiff_t>(j * cols), cols,
                  out.values.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(parts[r].candidates[j]) * cols));
  report_memory(*planned[widest], graphs[widest], out);  // the rank that needs the most
  out.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.arena_bytes = ranks_.arena_bytes();
  return out;
}

#ifdef MOSAIC_HAVE_CUDA

CudaStepRunner::CudaStepRunner(const Model& model, int device, std::optional<uint64_t> budget,
                               std::vector<int32_t> streamed_layers)
    : model_(model),
      device_(device),
      replay_padding_(replay_padding_from_environment()),
      executor_(std::make_unique<CudaExecutor>(model, device, streamed_layers)),
      canvases_(std::make_unique<DeviceCanvases>(executor_->stream())),
      arena_(make_cuda_arena(device)),
      budget_(budget) {
  const uint64_t scratch = CudaExecutor::head_scratch_per_row(model.config().vocab);
  logits_options_ = graph_options(DType::bf16, HeadMode::logits);
  stats_options_ = graph_options(DType::bf16, HeadMode::stats, scratch);
  for (GraphOptions* options : {&logits_options_, &stats_options_})
    options->streamed_layers = streamed_layers, options->staged_weight_bytes = 2;  // staged as bf16
  logits_planner_ = std::make_unique<StepPlanner>(model.config(), logits_options_);
  stats_planner_ = std::make_unique<StepPlanner>(model.config(), stats_options_);
  fixed_bytes_ = executor_->weight_bytes() + std::max(executor_->workspace_bytes(), kCudaWorkspaceReserveBytes);
  if (budget && fixed_bytes_ >= *budget)
    fail("the weights and workspace ({}{}) alone exceed the budget of {}{}", format_bytes(fixed_bytes_),
         streamed_layers.empty() ? std::string() : fmt::format(", with {} layers' weights in host memory",
                                                                streamed_layers.size()),
         format_bytes(*budget),
         static_cast<int64_t>(streamed_layers.size()) < model.config().layers
             ? "; --streamed-layers N keeps the last N layers' weights in host memory"
             : "");
  // The residual stream goes to host memory only for steps that cannot fit well otherwise
  // (chunk/chunk_search.h); MOSAIC_RESIDUAL_IN_HOST=1 keeps it there for every step (tests compare
  // the bits), =0 never (benchmarks compare the placements).
  const char* in_host = std::getenv("MOSAIC_RESIDUAL_IN_HOST");
  const std::string_view forced = in_host != nullptr ? in_host : "";
  chunker_ = std::make_unique<StepChunker>(model.config(), arena_->granularity(),
                                           forced == "1"   ? ResidualPlacement::host
                                           : forced == "0" ? ResidualPlacement::device
                                                           : ResidualPlacement::fit);
}

uint64_t CudaStepRunner::cache_bytes() const { return cache_ ? cache_->bytes() : 0; }

std::optional<uint64_t> CudaStepRunner::arena_budget() const {
  if (!budget_) return std::nullopt;
  const uint64_t taken = fixed_bytes_ + cache_bytes();
  return *budget_ - std::min(*budget_, taken);
}

uint64_t CudaStepRunner::reserve_cache(int64_t positions) {
  std::lock_guard lock(mutex_);
  if (!cache_) cache_ = std::make_unique<CudaKvCache>(device_, model_.config().layers, model_.config().kv_dim(),
                                                      pages_.page_rows());
  const int64_t pages = pages_.pages_for(positions);
  const int64_t high = pages_.high_water_after(pages);
  const StepMemorySetup setup = memory_setup_locked();
  const uint64_t needed = kv_cache_bytes(setup, model_.config().layers, high);
  if (budget_ && fixed_bytes_ + needed > *budget_)
    refuse_cache(positions, pages, needed, cache_bytes(), *budget_ - fixed_bytes_);
  const uint64_t id = pages_.reserve(pages);
  if (!cache_->resize(pages_.high_water())) {
    pages_.release(id);
    fail("the GPU is out of memory for the KV cache of a sequence of {} positions ({} pages, {} in all)", positions,
         pages, format_bytes(needed));
  }
  return id;
}

void CudaStepRunner::release_cache(uint64_t id) {
  std::lock_guard lock(mutex_);
  if (!pages_.holds(id)) return;
  pages_.release(id);
  const bool shrunk = cache_->resize(pages_.high_water());
  MOSAIC_ASSERT(shrunk, "giving back KV cache pages cannot fail");
}

KvCacheStats CudaStepRunner::cache_stats() const {
  std::lock_guard lock(mutex_);
  std::optional<uint64_t> room;
  if (budget_) room = *budget_ - std::min(*budget_, fixed_bytes_);
  return cache_stats_of(pages_, memory_setup_locked().cache_page_bytes, cache_ ? cache_->pages() : 0, cache_bytes(),
                        room);
}

CudaStepRunner::~CudaStepRunner() = default;

uint64_t CudaStepRunner::weight_bytes() const { return executor_->weight_bytes(); }
uint64_t CudaStepRunner::streamed_weight_bytes() const { return executor_->streamed_weight_bytes(); }

StepMemorySetup CudaStepRunner::memory_setup() const {
  std::lock_guard lock(mutex_);
  return memory_setup_locked();
}

StepMemorySetup CudaStepRunner::memory_setup_locked() const {
  StepMemorySetup setup{stats_options_, logits_options_, fixed_bytes_, arena_->granularity()};
  const ModelConfig& c = model_.config();
  setup.cache_page_rows = pages_.page_rows();
  setup.cache_page_bytes = static_cast<uint64_t>(2 * c.layers * pages_.page_rows() * c.kv_dim() * 2);
  setup.cache_region_granule = arena_->granularity();  // the cache's regions map what the arena maps
  setup.residual_may_stream = true;
  return setup;
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

StepOutput CudaStepRunner::run(const StepInput& unpadded) {
  const auto start = std::chrono::steady_clock::now();
  // Small steps take every row their computed positions predict, so that a block's steps share
  // one shape and replay one CUDA graph (exec/replay_padding.h); the output is unpadded below.
  std::optional<PaddedStep> padded;
  if (replay_padding_ && executor_->graphs_enabled()) padded = pad_candidates_for_replay(model_.config(), unpadded);
  const StepInput& input = padded ? padded->input : unpadded;
  PackedBatch packed = pack_batch(model_.config(), input.sequences);
  StepShape shape = step_shape_of(model_.config(), input.sequences);
  const bool cached = cached_batch(input.sequences);
  const size_t sequences = input.sequences.size();
  MOSAIC_ASSERT(input.device_commit.empty() || input.device_commit.size() == sequences,
                "one device-commit entry per sequence");
  std::lock_guard lock(mutex_);
  if (cached) add_cache_views(pages_, input.sequences, shape, packed);
  StepOutput out;
  StepPlanner& planner = input.keep_logits ? *logits_planner_ : *stats_planner_;
  out.chunks = chunker_->chunks_for(shape, planner.options(), arena_budget());
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
  io.cache = cached ? cache_.get() : nullptr;
  io.shape_repeats = padded.has_value();
  const size_t replays_before = executor_->graph_replays();
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
  if (padded) unpad_output(*padded, out);
  report_memory(*planned, graph, out);
  out.host_seconds = std::chrono::duration<double>(executor_->last_launch_end() - start).count();
  out.graph_replayed = executor_->graph_replays() > replays_before;
  out.device_seconds = result.device_seconds;
  out.arena_bytes = arena_->mapped();
  return out;
}

#endif

}  // namespace mosaic
