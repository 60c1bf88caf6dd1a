// Runs an instantiated step graph on the CUDA backend: weights live in one device allocation of
// their own (bf16), every activation in the arena at its planned offset, every op one kernel
// (or cuBLASLt call) on one stream — except that a long attention op's last rows run on a second
// stream beside the o-projection of the rows before them (exec/attention_tail_split.h). Mirrors
// cpu_executor.cc op for op; the graph's activation dtype must be bf16.
#pragma once

#include <cuda_runtime.h>

#include <chrono>

#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/commit.h"
#include "core/commit_rule.h"
#include "core/head_sampling.h"
#include "exec/forward_batch.h"
#include "graph/graph.h"
#include "mem/cuda_arena.h"
#include "mem/cuda_kv_cache.h"
#include "model/model_weights.h"
#include "plan/step_planner.h"

namespace mosaic {

// What a step reads from and leaves on the device beyond the arena (docs/design/device-commit.md).
struct DeviceStepIo {
  // Per sequence of the batch: its canvas on the device, copied into the step's ids on the
  // device, or null to upload the sequence's ids from the batch. Empty: upload every sequence's.
  std::span<int32_t* const> canvases;
  // Sequences unmasked on the device after the head, from its statistics (which must be the
  // output, HeadMode::stats, with per-row sampling given).
  std::span<const cuda::CommitSequence> commits;
  bool copy_output = true;  // false: the output tensor stays on the device
  // A cached step's resident tensors: the layers' regions of this KV cache.
  const CudaKvCache* cache = nullptr;
  // The caller expects this shape again (a step padded for replays, exec/replay_padding.h): its
  // CUDA graph is captured at the first sighting instead of the second.
  bool shape_repeats = false;
};

struct CudaStepResult {
  std::vector<float> values;            // the output tensor, when copy_output
  std::vector<CommittedRow> committed;  // [rows] when there were commits (rows of other sequences: undefined)
  // From the step's first upload to its last copy back, on the device's clock: the part of the
  // step's wall time the host did not cost the device (the rest: packing and planning before the
  // first upload, the return after the last copy).
  double device_seconds = 0;
};

class CudaExecutor {
 public:
  // Uploads the weights (converted to bf16 where stored otherwise). Throws mosaic::Error when the
  // device cannot hold them.
  // `streamed_layers`: decoder layers whose product weights stay in pinned host memory, in their
  // staged layout (graph/weight_staging.h), and are copied into each step's staged tensors on a
  // copy stream one layer ahead of use. Throws mosaic::Error when pinned memory cannot be had, or
  // for a layer with experts (dense layers only, for now).
  CudaExecutor(const Model& model, int device = 0, std::span<const int32_t> streamed_layers = {});
  ~CudaExecutor();

  // Runs the graph with tensors at the plan's offsets in `arena` (which must already cover the
  // plan's peak), then the device commit of `io`. Returns the output tensor (fp32 logits or head
  // statistics) and the committed rows, copied to the host.
  CudaStepResult run(const Graph& graph, const PlannedStep& planned, CudaArena& arena,
                     const PackedBatch& batch, std::span<const HeadRowSampling> sampling = {},
                     const DeviceStepIo& io = {});

  // The stream every run() uses: work for the same step (canvas uploads) is ordered on it.
  cudaStream_t stream() const;

  // When the last run() had enqueued all its work (before it waited for the result).
  std::chrono::steady_clock::time_point last_launch_end() const;
  // Steps whose forward was launched as a replayed CUDA graph (exec/cuda_step_graphs.h).
  size_t graph_replays() const;
  bool graphs_enabled() const;  // whether steps may replay graphs (MOSAIC_CUDA_GRAPHS, a failed capture)

  uint64_t weight_bytes() const;      // device bytes of the uploaded weights
  uint64_t streamed_weight_bytes() const;  // pinned host bytes of the streamed layers' weights
  uint64_t workspace_bytes() const;   // cuBLASLt workspace and small per-step buffers
  // Bytes per candidate row the fused head needs as scratch (GraphOptions::head_scratch_per_row).
  static uint64_t head_scratch_per_row(int64_t vocab);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic
