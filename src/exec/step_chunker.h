// Lazy chunking for a step runner: the chunk counts a step needs to fit the activation budget,
// searched once per shape bucket and head mode (the bucket's shape bounds every step in it), so a
// decode loop does not search every step.
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
  // `activation_budget` unset: never chunk. `granule`: the arena's allocation unit.
  StepChunker(const ModelConfig& config, std::optional<uint64_t> activation_budget, uint64_t granule)
      : config_(config), budget_(activation_budget), granule_(granule) {}

  // Throws mosaic::Error naming the bytes needed when no chunking fits the budget.
  ChunkConfig chunks_for(const StepShape& shape, const GraphOptions& options);

 private:
  const ModelConfig& config_;
  std::optional<uint64_t> budget_;
  uint64_t granule_;
  std::map<std::tuple<int64_t, int64_t, int>, ChunkConfig> cache_;  // per bucket and head mode
};

// The shape of a batch: lengths and candidate rows per sequence.
StepShape step_shape_of(std::span<const SequenceRows> sequences);

}  // namespace mosaic
