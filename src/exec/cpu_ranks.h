// The CPU runner's ranks (docs/design/tensor-parallel.md): one, holding the whole model, or R
// tensor-parallel ranks, each a thread with its shard (model/tensor_parallel.h), its executor,
// arena and KV cache, joined by a CpuThreadCommunicator. Every rank runs the same graph over the
// same plan; the step's result is rank 0's (every rank holds the same statistics), or for
// materialised logits the ranks' vocabulary columns side by side.
#pragma once

#include <cstdint>
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

class CpuRanks {
 public:
  // ranks == 1: the model itself; > 1: its shards (throws mosaic::Error when it cannot split).
  CpuRanks(const Model& model, int64_t ranks, int64_t cache_page_rows);
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

 private:
  struct Rank;
  const Model& model_;
  std::unique_ptr<CpuThreadGroup> group_;  // joins the ranks; none for one rank
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace mosaic
