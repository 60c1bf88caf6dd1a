#include "plan/step_planner.h"

#include <bit>

#include "core/error.h"
#include "plan/first_fit.h"
#include "plan/greedy_by_area.h"
#include "plan/greedy_by_size.h"
#include "plan/verify.h"

namespace mosaic {

int64_t bucket_rows(int64_t rows) {
  if (rows <= 0) return rows;
  if (rows <= 256) return (rows + 15) / 16 * 16;
  const int64_t granule = int64_t{1} << (std::bit_width(static_cast<uint64_t>(rows)) - 1 - 4);
  return (rows + granule - 1) / granule * granule;
}

StepShape bucket_shape(int64_t tokens, int64_t candidates, bool cached, int64_t page_rows) {
  StepShape shape{{tokens}, {candidates}};
  if (cached) {
    // One sequence of `tokens` computed rows at the start of a canvas of as many positions: the
    // transient tensors of a cached step depend only on its computed and candidate rows.
    shape.page_rows = page_rows;
    shape.cached.push_back({0, tokens, std::vector<int32_t>(static_cast<size_t>((tokens + page_rows - 1) / page_rows))});
  }
  return shape;
}

std::vector<TensorUsage> usages_of(const Graph& graph) {
  std::vector<TensorUsage> usages;
  usages.reserve(graph.tensors.size());
  // Resident tensors (the KV cache) and host tensors (a residual stream in host memory) take no
  // room in the arena.
  for (const GraphTensor& t : graph.tensors) usages.push_back({t.resident || t.host ? 0 : t.bytes(), t.first_op, t.last_op});
  return usages;
}

PlannedStep plan_graph(Graph graph, PlannerKind kind) {
  PlannedStep step;
  step.usages = usages_of(graph);
  switch (kind) {
    case PlannerKind::best: {
      MemoryPlan by_area = plan_greedy_by_area(step.usages);
      MemoryPlan by_size = plan_greedy_by_size(step.usages);
      step.plan = by_size.peak_bytes < by_area.peak_bytes ? std::move(by_size) : std::move(by_area);
      break;
    }
    case PlannerKind::greedy_by_area: step.plan = plan_greedy_by_area(step.usages); break;
    case PlannerKind::greedy_by_size: step.plan = plan_greedy_by_size(step.usages); break;
    case PlannerKind::first_fit: step.plan = plan_first_fit(step.usages); break;
  }
  const auto problem = verify_plan(step.usages, step.plan);
  MOSAIC_ASSERT(!problem, "planner produced an invalid plan: {}", *problem);
  step.memory = step_memory(step.usages, step.plan, graph.op_count());
  step.graph = std::move(graph);
  return step;
}

StepPlanner::StepPlanner(const ModelConfig& config, GraphOptions options, PlannerKind kind)
    : config_(config), options_(options), kind_(kind) {}

std::shared_ptr<const PlannedStep> StepPlanner::plan(const Graph& graph) {
  const ChunkConfig& chunks = graph.chunks;
  const int64_t tokens = bucket_rows(graph.tokens);
  const int64_t candidates = std::min(bucket_rows(graph.candidates), tokens);
  const Key key{tokens, candidates, chunks.qkv, chunks.attention, chunks.ffn, chunks.head,
                chunks.last_layer_all_rows, chunks.residual_in_host, graph.cached()};
  {
    std::lock_guard lock(mutex_);
    if (const auto found = cache_.find(key); found != cache_.end()) {
      ++hits_;
      return found->second;
    }
  }
  // A context-parallel rank's graph holds `tokens` rows of a batch R times as long
  // (graph/context_parallel.h): its bucket is that batch, the rank's candidates its own.
  const StepShape bucket =
      bucket_shape(tokens * options_.context_parallel, candidates, graph.cached(), graph.kv_page_rows);
  auto planned = std::make_shared<const PlannedStep>(
      plan_graph(instantiate_step_graph(config_, bucket, chunks, options_), kind_));
  MOSAIC_ASSERT(planned->graph.tensors.size() == graph.tensors.size() &&
                    planned->graph.op_count() == graph.op_count(),
                "bucket graph differs in structure from the step's graph");
  std::lock_guard lock(mutex_);
  ++misses_;
  return cache_.emplace(key, std::move(planned)).first->second;
}

Graph StepPlanner::instantiate(const StepShape& shape, const ChunkConfig& chunks) const {
  return instantiate_step_graph(config_, shape, chunks, options_);
}

size_t StepPlanner::cache_size() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

}  // namespace mosaic
