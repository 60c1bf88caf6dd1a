// One denoising step's forward for a batch, as the generation loop sees it: sequences (canvas +
// candidate rows), per-row sampling, and whether the logits must be kept. The CPU runner plans
// the step (bucketed plan cache; lazy chunking when a budget is set) and executes it.
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
#include "core/head_sampling.h"
#include "exec/cpu_executor.h"
#include "exec/forward_batch.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"

namespace mosaic {

struct StepInput {
  std::vector<SequenceRows> sequences;
  std::vector<HeadRowSampling> sampling;  // one per candidate row, in batch order
  bool keep_logits = false;               // materialise [rows, vocab] instead of the fused head
};

struct StepOutput {
  std::vector<float> values;  // [rows, cols]
  int64_t cols = 0;           // kHeadStatCount, or the vocabulary size when logits were kept
  ChunkConfig chunks;
  uint64_t planned_peak = 0, lower_bound = 0, arena_bytes = 0;
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual StepOutput run(const StepInput& input) = 0;
};

class CpuStepRunner final : public StepRunner {
 public:
  // `activation_budget`: arena bytes allowed; steps that exceed it are chunked lazily, steps that
  // cannot fit fail with mosaic::Error. Unset: never chunk.
  CpuStepRunner(const Model& model, std::optional<uint64_t> activation_budget = std::nullopt);

  StepOutput run(const StepInput& input) override;

 private:
  ChunkConfig chunks_for(const StepShape& shape, HeadMode head);

  const Model& model_;
  std::optional<uint64_t> budget_;
  StepPlanner logits_planner_, stats_planner_;
  CpuExecutor executor_;
  CpuArena arena_;
  std::mutex mutex_;
  std::map<std::tuple<int64_t, int64_t, int>, ChunkConfig> chunk_cache_;  // per bucket and head
};

}  // namespace mosaic
