// Runs an instantiated step graph on the CPU backend: every tensor lives in one arena at its
// planned offset (pointer = arena base + offset + first row of the view), every op is a call
// of a backend/cpu kernel on raw pointers and dimensions.
#pragma once

#include <span>
#include <vector>

#include "backend/cpu/lm_head.h"

#include "exec/communicator.h"
#include "exec/forward_batch.h"
#include "graph/graph.h"
#include "mem/cpu_arena.h"
#include "mem/cpu_kv_cache.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"

namespace mosaic {

// What a rank's executor needs beside its weights: under tensor parallelism the global id of its
// shard's first vocabulary row (model/tensor_parallel.h), and under tensor or context parallelism
// the communicator joining it to the other ranks.
struct ParallelRank {
  int64_t vocab_begin = 0;
  Communicator* communicator = nullptr;
};

class CpuExecutor {
 public:
  // Converts the small per-layer vectors (norm weights, biases) to fp32 once.
  explicit CpuExecutor(const Model& model) : CpuExecutor(model.config(), model.weights()) {}
  // One rank: `config` and `weights` are its shard's under tensor parallelism, the model's
  // otherwise; with no communicator, one device holding every weight.
  CpuExecutor(const ModelConfig& config, const ModelWeights& weights, ParallelRank rank = {});

  // Runs `graph` with tensors at `planned`'s offsets in `arena` (grown to the plan's peak). The
  // plan may come from a larger bucket of the same structure: each tensor must fit its slot.
  // The batch supplies the inputs (ids, positions, logit rows). Returns the output tensor's
  // contents: logits [candidates, vocab] or head statistics [candidates, kHeadStatsCols].
  // `sampling`: one entry per candidate row for the fused head (empty: greedy, raw statistics).
  // A cached step's resident tensors are the layers' regions of `cache`.
  std::vector<float> run(const Graph& graph, const PlannedStep& planned, CpuArena& arena,
                         const PackedBatch& batch, std::span<const HeadRowSampling> sampling = {},
                         CpuKvCache* cache = nullptr) const;

 private:
  const std::vector<float>& small_weight(int32_t layer, WeightRole role) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  ParallelRank rank_;
  // [layer][role] for norms and biases; global ones at index layers().
  std::vector<std::vector<std::vector<float>>> small_;
};

}  // namespace mosaic
