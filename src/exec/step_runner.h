// One denoising step's forward for a batch, as the generation loop sees it: sequences (canvas +
// candidate rows), per-row sampling, and whether the logits must be kept. The CPU runner plans
// the step (bucketed plan cache; lazy chunking when a budget is set) and executes it. The CUDA
// runner can also commit on the device and keeps canvases there between steps
// (docs/design/device-commit.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "cache/kv_page_pool.h"
#include "chunk/chunk_search.h"
#include "core/commit_rule.h"
#include "core/head_sampling.h"
#include "exec/cpu_ranks.h"
#include "exec/forward_batch.h"
#include "exec/step_chunker.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"

namespace mosaic {

struct StepInput {
  std::vector<SequenceRows> sequences;
  std::vector<HeadRowSampling> sampling;  // one per candidate row, in batch order
  bool keep_logits = false;               // materialise [rows, vocab] instead of the fused head
  // Per sequence (or empty: none): unmask its rows on the device by this rule instead of returning
  // their statistics. Only for a runner whose commits_on_device(), never with keep_logits, and
  // only for sequences with a canvas_id (the canvas the commit writes).
  std::vector<std::optional<CommitRule>> device_commit;
};

struct StepOutput {
  std::vector<float> values;  // [rows, cols]
  int64_t cols = 0;           // kHeadStatCount, or the vocabulary size when logits were kept
  // values is empty when every sequence committed on the device (nothing else needs the rows).
  std::vector<CommittedRow> committed;  // [rows] when any sequence committed on the device
  ChunkConfig chunks;
  bool last_layer_over_candidates = false;  // its last layer ran over the candidate rows only
  // Memory of the step (ARCHITECTURE.md, "Measuring"): planned peak, lower bound and mean of
  // the live bytes over ops, and what the arena has mapped. PAR = peak / average; inflation =
  // arena bytes / lower bound. A cached step's figures include the KV cache of its sequences
  // (`resident` bytes, live at every op) beside the arena's.
  uint64_t planned_peak = 0, lower_bound = 0, average_live = 0, arena_bytes = 0, resident = 0;
  // Seconds the host spent on the step before waiting for its result (packing, planning, kernel
  // launches); on the CPU backend the whole step.
  double host_seconds = 0;
  // The forward replayed a captured CUDA graph (exec/cuda_step_graphs.h); CPU: never.
  bool graph_replayed = false;
  // CUDA: the span from the step's first upload to its last copy back on the device's clock;
  // 0 on the CPU. The host's exposed time is the wall time less this.
  double device_seconds = 0;
};

// The KV cache's page geometry and use (docs/design/kv-cache.md).
struct KvCacheStats {
  int64_t page_rows = 0;       // positions a page holds
  uint64_t page_bytes = 0;     // K and V of a page's positions over every layer
  int64_t pages_used = 0;      // held by sequences
  int64_t pages_mapped = 0;    // backed by memory (up to the highest page in use)
  int64_t sequences = 0;
  uint64_t bytes = 0;          // memory the cache holds now
  // Pages a reservation could still take under the budget, beside the weights (unlimited: -1).
  int64_t pages_free = -1;

  // The pages mapped once `pages` more are held: the lowest free ones below the top go first
  // (KvPagePool::high_water_after, as seen from outside the runner).
  int64_t pages_mapped_after(int64_t pages) const {
    return pages_mapped + std::max<int64_t>(0, pages - (pages_mapped - pages_used));
  }
};

// What a runner plans its steps with, for callers that predict its memory (admission by plan).
struct StepMemorySetup {
  GraphOptions stats_options, logits_options;  // fused head / materialised logits
  uint64_t fixed_bytes = 0;                    // weights + workspace: the budget minus the arena's share
  uint64_t granule = 1;                        // the arena maps whole granules
  // The KV cache: positions a page holds, bytes of a page, and the unit its memory grows by in
  // each of its 2 x layers regions.
  int64_t cache_page_rows = 0;
  uint64_t cache_page_bytes = 0;
  uint64_t cache_region_granule = 1;
  // The residual stream may go to host memory where a step cannot fit otherwise (a CUDA runner:
  // graph/residual_staging.h); the chunk search asks the same.
  bool residual_may_stream = false;
};

// Bytes a KV cache of `pages` pages holds, each of its 2 x layers regions mapped in whole granules.
uint64_t kv_cache_bytes(const StepMemorySetup& setup, int64_t layers, int64_t pages);

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual StepOutput run(const StepInput& input) = 0;
  // Whether run() honours StepInput::device_commit.
  virtual bool commits_on_device() const { return false; }
  // The canvas will not be stepped again: a runner that keeps it drops it (unknown ids: nothing).
  virtual void release_canvas(uint64_t /*canvas_id*/) {}

  // The KV cache (docs/design/kv-cache.md): pages for a sequence of `positions` positions, held
  // until release_cache(); the id is what SequenceRows::cache_id names. Throws mosaic::Error when
  // the budget cannot hold them beside the weights and the other sequences' pages (nothing
  // changes then).
  virtual uint64_t reserve_cache(int64_t positions) = 0;
  virtual void release_cache(uint64_t id) = 0;  // unknown ids: nothing
  virtual KvCacheStats cache_stats() const = 0;
};

class CpuStepRunner final : public StepRunner {
 public:
  // `activation_budget`: bytes allowed beside the weights, for the arena and the KV cache; steps
  // that exceed it are chunked lazily, steps that cannot fit fail with mosaic::Error. Unset:
  // never chunk. `cache_page_rows`: positions a KV cache page holds. `tensor_parallel`: ranks that
  // split the model (exec/cpu_ranks.h); the budget is then each rank's, beside its shard.
  // `context_parallel`: ranks that split the step's rows (graph/context_parallel.h), each holding
  // the whole model; the budget is each rank's. Not with a KV cache yet.
  explicit CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget = std::nullopt,
                         int64_t cache_page_rows = kCpuCachePageRows, int64_t tensor_parallel = 1,
                         int64_t context_parallel = 1);
  ~CpuStepRunner() override;

  StepOutput run(const StepInput& input) override;
  StepMemorySetup memory_setup() const;
  uint64_t reserve_cache(int64_t positions) override;
  void release_cache(uint64_t id) override;
  KvCacheStats cache_stats() const override;

  // Small pages, so that the tests' short canvases span several.
  static constexpr int64_t kCpuCachePageRows = 16;

 private:
  std::optional<uint64_t> arena_budget() const;  // the activation budget less the cache's bytes
  StepOutput run_context_parallel(const StepInput& input);

  const Model& model_;
  std::optional<uint64_t> activation_budget_;
  // The planners of a rank's graphs (logits, stats): one pair, or under context parallelism one per
  // rank (each rank's graph holds its own rows).
  struct RankPlanners;
  std::vector<std::unique_ptr<RankPlanners>> planners_;
  bool context_parallel() const { return planners_.size() > 1; }
  CpuRanks ranks_;
  StepChunker chunker_;
  KvPagePool pages_;
  mutable std::mutex mutex_;
};

#ifdef MOSAIC_HAVE_CUDA
class CudaExecutor;
class CudaArena;
class CudaKvCache;
class DeviceCanvases;

// The same on the GPU: bf16 activations, the fused head's scratch planned with the rest, the
// arena mapped (VMM pages) exactly to each step's plan. Canvases with an id stay on the device
// between steps (uploaded only when new or changed by the host); sequences with a device-commit
// rule are unmasked there and only their rows' outcomes come back.
class CudaStepRunner final : public StepRunner {
 public:
  // `budget`: all device bytes the engine may use (weights + workspace + arena); unset: the
  // device's free memory decides (a step that does not fit fails with mosaic::Error).
  // `streamed_layers`: layers whose product weights stay in pinned host memory and are staged
  // into each step's plan one layer ahead (graph/weight_staging.h; dense layers only).
  CudaStepRunner(const Model& model, int device, std::optional<uint64_t> budget,
                 std::vector<int32_t> streamed_layers = {});
  ~CudaStepRunner() override;

  StepOutput run(const StepInput& input) override;
  bool commits_on_device() const override { return true; }
  void release_canvas(uint64_t canvas_id) override;
  uint64_t weight_bytes() const;
  uint64_t streamed_weight_bytes() const;  // pinned host bytes of the streamed layers' weights
  StepMemorySetup memory_setup() const;
  uint64_t reserve_cache(int64_t positions) override;
  void release_cache(uint64_t id) override;
  KvCacheStats cache_stats() const override;

  // KV cache pages hold whole key tiles of the attention kernels (cuda/attention.h).
  static constexpr int64_t kCudaCachePageRows = 128;

  // What the device holds of a canvas (empty when it holds none), and how many canvas uploads
  // the runner has made: for tests and debugging of the residency.
  std::vector<int32_t> resident_canvas(uint64_t canvas_id);
  int64_t canvas_uploads();
  // Steps whose forward replayed a captured CUDA graph (exec/cuda_step_graphs.h).
  size_t graph_replays();

 private:
  const Model& model_;
  int device_ = 0;
  bool replay_padding_ = true;  // MOSAIC_REPLAY_PADDING=0: off (exec/replay_padding.h)
  std::unique_ptr<CudaExecutor> executor_;
  std::unique_ptr<DeviceCanvases> canvases_;
  std::unique_ptr<CudaArena> arena_;
  std::unique_ptr<StepChunker> chunker_;
  uint64_t fixed_bytes_ = 0;  // weights + workspace reserve
  std::optional<uint64_t> budget_;
  std::unique_ptr<StepPlanner> logits_planner_, stats_planner_;
  GraphOptions logits_options_, stats_options_;
  KvPagePool pages_{kCudaCachePageRows};
  std::unique_ptr<CudaKvCache> cache_;  // made at the first reservation
  mutable std::mutex mutex_;

  std::optional<uint64_t> arena_budget() const;  // the budget less weights, workspace and cache
  uint64_t cache_bytes() const;
  StepMemorySetup memory_setup_locked() const;
};
#endif

}  // namespace mosaic
