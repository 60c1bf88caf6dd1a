// Lazy chunking for a step runner: the chunk counts a step needs to fit the activation budget,
// searched once per shape bucket, head mode and step form (the bucket's shape bounds every step
// in it), so a decode loop does not search every step. The budget may change between steps (a KV
// cache's pages take their share of the engine's budget): a remembered configuration is reused
// while it still fits and no larger budget could do with fewer chunks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <tuple>

#include "chunk/chunk_search.h"
#include "exec/forward_batch.h"
#include "graph/step_shape.h"
#include "model/config.h"

namespace mosaic {

class StepChunker {
 public:
  // `granule`: the arena's allocation unit. `residual`: where the residual stream may live
  // (graph/residual_staging.h): a CUDA runner's `fit` keeps it in host memory for the steps that
  // cannot fit otherwise; `host` keeps it there for every step, budget or not (for tests).
  StepChunker(const ModelConfig& config, uint64_t granule, ResidualPlacement residual = ResidualPlacement::device)
      : config_(config), granule_(granule), residual_(residual) {}

  // `activation_budget` unset: never chunk. Throws mosaic::Error naming the bytes needed when no
  // chunking fits the budget.
  ChunkConfig chunks_for(const StepShape& shape, const GraphOptions& options,
                         std::optional<uint64_t> activation_budget);

 private:
  struct Found {
    ChunkConfig chunks;
    uint64_t planned_peak = 0;  // arena bytes the configuration needs
    uint64_t budget = 0;        // the budget it was searched under
  };
  const ModelConfig& config_;
  uint64_t granule_;
  ResidualPlacement residual_;
  // per bucket (tokens, candidates), head mode and whether the step is cached
  std::map<std::tuple<int64_t, int64_t, int, bool>, Found> found_;
};

// The shape of a batch: computed and candidate rows per sequence, block layouts and candidate
// positions where attention is block-causal. A cached step's cache views are added by the runner,
// which holds the pages (exec/kv_cache_views.h).
StepShape step_shape_of(const ModelConfig& config, std::span<const SequenceRows> sequences);

}  // namespace mosaic
