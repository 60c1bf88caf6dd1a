// Runs an instantiated step graph on the CUDA backend: weights live in one device allocation of
// their own (bf16), every activation in the arena at its planned offset, every op one kernel
// (or cuBLASLt call) on one stream. Mirrors cpu_executor.cc op for op; the graph's activation
// dtype must be bf16.
#pragma once

#include <cuda_runtime.h>

#include <chrono>

#include <memory>
#include <span>
#include <vector>

#include "core/head_sampling.h"
#include "exec/forward_batch.h"
#include "graph/graph.h"
#include "mem/cuda_arena.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"

namespace mosaic {

class CudaExecutor {
 public:
  // Uploads the weights (converted to bf16 where stored otherwise). Throws mosaic::Error when the
  // device cannot hold them.
  CudaExecutor(const Model& model, int device = 0);
  ~CudaExecutor();

  // Runs the graph with tensors at the plan's offsets in `arena` (which must already cover the
  // plan's peak). Returns the output tensor (fp32 logits or head statistics), copied to the host.
  std::vector<float> run(const Graph& graph, const PlannedStep& planned, CudaArena& arena,
                         const PackedBatch& batch, std::span<const HeadRowSampling> sampling = {});

  // When the last run() had enqueued all its work (before it waited for the result).
  std::chrono::steady_clock::time_point last_launch_end() const;

  uint64_t weight_bytes() const;      // device bytes of the uploaded weights
  uint64_t workspace_bytes() const;   // cuBLASLt workspace and small per-step buffers
  // Bytes per candidate row the fused head needs as scratch (GraphOptions::head_scratch_per_row).
  static uint64_t head_scratch_per_row(int64_t vocab);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic
