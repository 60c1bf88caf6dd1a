// Plans a step: instantiate the family's graph, derive usage records, assign offsets, verify.
// A decode loop asks for a plan every step; plans are cached by a bucketed shape so that steps
// whose sizes fall in the same bucket reuse one plan (sized for the bucket's upper edge).
//
//   StepPlanner planner(config, {.activations = DType::f32});
//   Graph graph = planner.instantiate(shape, chunks);  // the actual step's ops
//   auto planned = planner.plan(graph);                // shared, immutable, cached
//   executor.run(graph, planned->plan, ...);           // offsets from the bucket's plan
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "graph/step_graph.h"
#include "plan/step_memory.h"
#include "plan/tensor_usage.h"

namespace mosaic {

enum class PlannerKind : uint8_t {
  best,            // the lower peak of greedy-by-area and greedy-by-size (the default)
  greedy_by_area,
  greedy_by_size,
  first_fit,
};

struct PlannedStep {
  Graph graph;                      // instantiated at the bucket's shape
  std::vector<TensorUsage> usages;  // one per graph tensor
  MemoryPlan plan;
  StepMemory memory;
};

// Rounds a row count up to its bucket: multiples of 16 below 256, then 16 buckets per power of
// two (at most 6.25% above the true count).
int64_t bucket_rows(int64_t rows);

std::vector<TensorUsage> usages_of(const Graph& graph);

// The single-sequence shape a bucket's plan is made for: `tokens` computed rows, `candidates`
// of them candidates; for a cached step, the start of a canvas of as many positions.
StepShape bucket_shape(int64_t tokens, int64_t candidates, bool cached, int64_t page_rows);

// Plans exactly this graph (no bucketing); verifies the plan (MOSAIC_ASSERT).
PlannedStep plan_graph(Graph graph, PlannerKind kind = PlannerKind::best);

class StepPlanner {
 public:
  StepPlanner(const ModelConfig& config, GraphOptions options,
              PlannerKind kind = PlannerKind::best);

  // The graph of exactly this shape. Throws mosaic::Error for an impossible shape.
  Graph instantiate(const StepShape& shape, const ChunkConfig& chunks) const;
  // The plan of the bucket holding this graph (tokens and candidates rounded up, same chunks).
  // Its tensors correspond one to one with the graph's and are never smaller.
  std::shared_ptr<const PlannedStep> plan(const Graph& graph);

  const GraphOptions& options() const { return options_; }
  size_t cache_size() const;
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool>;

  ModelConfig config_;
  GraphOptions options_;
  PlannerKind kind_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<const PlannedStep>> cache_;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace mosaic
