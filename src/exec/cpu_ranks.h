// The CPU runner's ranks: one, holding the whole model; R tensor-parallel ranks
// (docs/design/tensor-parallel.md), each a thread with its shard (model/tensor_parallel.h), its
// executor, arena and KV cache, joined by a CpuThreadCommunicator, every rank running the same
// graph over the same plan, the step's result rank 0's (every rank holds the same statistics), or
// for materialised logits the ranks' vocabulary columns side by side; or R context-parallel ranks
// (docs/design/context-parallel.md), each holding the whole model and running its own rows' graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/head_sampling.h"
#include "exec/cpu_executor.h"
#include "exec/cpu_thread_communicator.h"
#include "exec/forward_batch.h"
#include "graph/graph.h"
#include "mem/cpu_arena.h"
#include "mem/cpu_kv_cache.h"
#include "model/model_weights.h"
#include "model/tensor_parallel.h"
#include "plan/step_planner.h"

namespace mosaic {

// What one rank runs in a context-parallel step (its own graph, plan and rows).
struct CpuRankStep {
  const Graph* graph = nullptr;
  const PlannedStep* planned = nullptr;
  const PackedBatch* batch = nullptr;
  std::span<const HeadRowSampling> sampling;
};

class CpuRanks {
 public:
  // tensor_parallel > 1: the model's shards (throws mosaic::Error when it cannot split);
  // context_parallel > 1: ranks each holding the whole model (not both at once); else one rank.
  CpuRanks(const Model& model, int64_t tensor_parallel, int64_t context_parallel, int64_t cache_page_rows);
  ~CpuRanks();

  int64_t count() const { return static_cast<int64_t>(ranks_.size()); }
  // One rank's weight bytes (every rank holds as many).
  uint64_t weight_bytes() const;
  // Every rank's cache backs pages [0, pages); one rank's figures (the same on each).
  void resize_caches(int64_t pages);
  uint64_t cache_page_bytes() const;
  uint64_t cache_bytes() const;
  int64_t cache_pages() const;
  uint64_t arena_bytes() const;

  // Runs the step on every rank (CpuExecutor::run). A rank that fails ends the step on every rank;
  // the error names it. Logits come back [candidates, vocab] over the whole vocabulary.
  std::vector<float> run(const Graph& graph, const PlannedStep& planned, const PackedBatch& batch,
                         std::span<const HeadRowSampling> sampling, bool cached);
  // A context-parallel step: rank r runs steps[r]; returns each rank's output tensor.
  std::vector<std::vector<float>> run_parts(std::span<const CpuRankStep> steps);

 private:
  struct Rank;
  // body(rank, r) on one thread per rank; a rank that throws ends the step on every rank.
  std::vector<std::vector<float>> on_every_rank(const std::function<std::vector<float>(Rank&, int64_t)>& body);
  const Model& model_;
  std::unique_ptr<CpuThreadGroup> group_;  // joins the ranks; none for one rank
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace mosaic
