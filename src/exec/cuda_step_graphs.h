// Replays a step's kernel launches as a CUDA graph: a decode loop enqueues the same ~400 launches
// (LLaDA-8B: 32 layers of GEMMs, norms, RoPE, attention, then the head) step after step, and one
// graph launch costs the host a few microseconds where the launches cost milliseconds.
//
// A step is identified by its launch signature: every value its launches read on the host —
// tensor addresses, row counts, strides, attention segments, op flags (CudaExecutor builds it).
// Equal signatures enqueue equal launches, so a graph captured for one replays for the other;
// what the kernels read from device memory (ids, positions, segments, sampling rows) is uploaded
// before each step as before, outside the graph. A signature is captured the second time it is
// seen, so that steps whose shapes never repeat (a serving batch that changes every step) never
// pay for a capture; the last `capacity` graphs are kept, a new capture evicting the least recently
// used. (Updating that graph in place with cudaGraphExecUpdate instead gave wrong tokens on the
// H200 in Dream's device-commit tests: docs/design/replay-padding.md.)
//
// MOSAIC_CUDA_GRAPHS=0 in the environment turns replays off (every step launches directly), as
// vLLM's enforce_eager does. docs/design/cuda-graphs.md.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <list>
#include <vector>

namespace mosaic {

class CudaStepGraphs {
 public:
  using Signature = std::vector<int64_t>;

  explicit CudaStepGraphs(size_t capacity = 8);  // reads MOSAIC_CUDA_GRAPHS once
  ~CudaStepGraphs();
  CudaStepGraphs(const CudaStepGraphs&) = delete;
  CudaStepGraphs& operator=(const CudaStepGraphs&) = delete;

  bool enabled() const { return enabled_; }
  // Enqueues a step's launches on `stream`: replays the graph of `signature`, or captures one
  // from `enqueue` (which must launch exactly the work the signature describes, on `stream` only)
  // when the signature was seen before (or at once when `expect_repeats` says it will come again
  // and the last graph captured was replayed), or calls `enqueue` directly. If CUDA does not capture
  // (beginning, ending or instantiating fails), the launches run directly and replays stay off
  // from then on (with a note on stderr). An exception from `enqueue` while capturing ends the
  // capture and `enqueue` runs directly: an error of the step itself then reaches the caller.
  void run(Signature signature, cudaStream_t stream, const std::function<void()>& enqueue,
           bool expect_repeats = false);

  size_t replays() const { return replays_; }  // graphs launched again after their capture

 private:
  struct Entry {
    Signature signature;
    cudaGraphExec_t graph = nullptr;
  };
  // Captures, instantiates and launches the graph of `signature`. False when nothing was
  // launched (the caller launches directly).
  bool capture(Signature signature, cudaStream_t stream, const std::function<void()>& enqueue);

  size_t capacity_;
  bool enabled_ = true;
  std::list<Entry> graphs_;         // most recently used first
  std::list<Signature> seen_once_;  // signatures run directly once, most recent first
  size_t replays_ = 0;
  bool last_capture_replayed_ = false;  // whether capturing has paid off lately (expect_repeats)
};

}  // namespace mosaic
