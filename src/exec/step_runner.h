// One denoising step's forward for a batch, as the generation loop sees it: sequences (canvas +
// candidate rows), per-row sampling, and whether the logits must be kept. The CPU runner plans
// the step (bucketed plan cache; lazy chunking when a budget is set) and executes it. The CUDA
// runner can also commit on the device and keeps canvases there between steps
// (docs/design/device-commit.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "chunk/chunk_search.h"
#include "core/commit_rule.h"
#include "core/head_sampling.h"
#include "exec/cpu_executor.h"
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
  // arena bytes / lower bound.
  uint64_t planned_peak = 0, lower_bound = 0, average_live = 0, arena_bytes = 0;
  // Seconds the host spent on the step before waiting for its result (packing, planning, kernel
  // launches); on the CPU backend the whole step.
  double host_seconds = 0;
};

// What a runner plans its steps with, for callers that predict its memory (admission by plan).
struct StepMemorySetup {
  GraphOptions stats_options, logits_options;  // fused head / materialised logits
  uint64_t fixed_bytes = 0;                    // weights + workspace: the budget minus the arena's share
  uint64_t granule = 1;                        // the arena maps whole granules
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual StepOutput run(const StepInput& input) = 0;
  // Whether run() honours StepInput::device_commit.
  virtual bool commits_on_device() const { return false; }
  // The canvas will not be stepped again: a runner that keeps it drops it (unknown ids: nothing).
  virtual void release_canvas(uint64_t /*canvas_id*/) {}
};

class CpuStepRunner final : public StepRunner {
 public:
  // `activation_budget`: arena bytes allowed; steps that exceed it are chunked lazily, steps that
  // cannot fit fail with mosaic::Error. Unset: never chunk.
  CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget = std::nullopt);

  StepOutput run(const StepInput& input) override;
  StepMemorySetup memory_setup() const;

 private:
  const Model& model_;
  StepPlanner logits_planner_, stats_planner_;
  CpuExecutor executor_;
  CpuArena arena_;
  StepChunker chunker_;
  std::mutex mutex_;
};

#ifdef MOSAIC_HAVE_CUDA
class CudaExecutor;
class CudaArena;
class DeviceCanvases;

// The same on the GPU: bf16 activations, the fused head's scratch planned with the rest, the
// arena mapped (VMM pages) exactly to each step's plan. Canvases with an id stay on the device
// between steps (uploaded only when new or changed by the host); sequences with a device-commit
// rule are unmasked there and only their rows' outcomes come back.
class CudaStepRunner final : public StepRunner {
 public:
  // `budget`: all device bytes the engine may use (weights + workspace + arena); unset: the
  // device's free memory decides (a step that does not fit fails with mosaic::Error).
  CudaStepRunner(const Model& model, int device, std::optional<uint64_t> budget);
  ~CudaStepRunner() override;

  StepOutput run(const StepInput& input) override;
  bool commits_on_device() const override { return true; }
  void release_canvas(uint64_t canvas_id) override;
  uint64_t weight_bytes() const;
  StepMemorySetup memory_setup() const;

  // What the device holds of a canvas (empty when it holds none), and how many canvas uploads
  // the runner has made: for tests and debugging of the residency.
  std::vector<int32_t> resident_canvas(uint64_t canvas_id);
  int64_t canvas_uploads();
  // Steps whose forward replayed a captured CUDA graph (exec/cuda_step_graphs.h).
  size_t graph_replays();

 private:
  const Model& model_;
  std::unique_ptr<CudaExecutor> executor_;
  std::unique_ptr<DeviceCanvases> canvases_;
  std::unique_ptr<CudaArena> arena_;
  std::unique_ptr<StepChunker> chunker_;
  uint64_t fixed_bytes_ = 0;  // weights + workspace reserve
  std::unique_ptr<StepPlanner> logits_planner_, stats_planner_;
  GraphOptions logits_options_, stats_options_;
  std::mutex mutex_;
};
#endif

}  // namespace mosaic
