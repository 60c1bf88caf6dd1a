#include "exec/cuda_step_graphs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace mosaic {
namespace {

// Signatures run directly once and remembered for a second sighting.
constexpr size_t kSeenOnceCapacity = 16;

}  // namespace

CudaStepGraphs::CudaStepGraphs(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {
  const char* setting = std::getenv("MOSAIC_CUDA_GRAPHS");
  enabled_ = setting == nullptr || std::strcmp(setting, "0") != 0;
}

CudaStepGraphs::~CudaStepGraphs() {
  for (Entry& entry : graphs_) cudaGraphExecDestroy(entry.graph);  // errors ignored
}

void CudaStepGraphs::run(Signature signature, cudaStream_t stream, const std::function<void()>& enqueue,
                         bool expect_repeats) {
  if (!enabled_) {
    enqueue();
    return;
  }
  const auto cached = std::ranges::find(graphs_, signature, &Entry::signature);
  if (cached != graphs_.end()) {
    MOSAIC_CUDA_CHECK(cudaGraphLaunch(cached->graph, stream));
    graphs_.splice(graphs_.begin(), graphs_, cached);
    ++replays_;
    last_capture_replayed_ = true;
    return;
  }
  // A shape the caller expects again is captured at once while captures pay off: the last one
  // captured was replayed (a serving batch whose shape changes every step turns this off).
  const bool eager = expect_repeats && last_capture_replayed_;
  const auto seen = std::ranges::find(seen_once_, signature);
  if (seen == seen_once_.end() && !eager) {
    seen_once_.push_front(std::move(signature));
    if (seen_once_.size() > kSeenOnceCapacity) seen_once_.pop_back();
    enqueue();
    return;
  }
  if (seen != seen_once_.end()) seen_once_.erase(seen);
  if (!capture(std::move(signature), stream, enqueue)) enqueue();
}

bool CudaStepGraphs::capture(Signature signature, cudaStream_t stream, const std::function<void()>& enqueue) {
  // A failure below leaves the stream out of capture mode, clears the error and turns replays
  // off: the caller then launches directly.
  auto give_up = [&](const char* what, cudaError_t status) {
    (void)cudaGetLastError();
    std::fprintf(stderr, "mosaic: note: CUDA graph %s failed (%s); steps launch their kernels directly from now on\n",
                 what, cudaGetErrorString(status));
    enabled_ = false;
    return false;
  };
  cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) return give_up("capture", status);
  bool enqueued = true;
  try {
    enqueue();
  } catch (...) {
    enqueued = false;
  }
  cudaGraph_t graph = nullptr;
  status = cudaStreamEndCapture(stream, &graph);
  if (!enqueued) {
    // A launch refused while capturing. Launched directly, a real error throws again (and replays
    // stay on: the step was wrong, not the capture); if it runs, capturing was the problem.
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    enqueue();
    give_up("capture", status != cudaSuccess ? status : cudaErrorStreamCaptureInvalidated);
    return true;
  }
  if (status != cudaSuccess) return give_up("capture", status);
  cudaGraphExec_t exec = nullptr;
  // Kernel nodes keep the priority of the stream they were captured from (the executor's tail
  // stream ranks below the step's: exec/attention_tail_split.h).
  status = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(graph);
  if (status != cudaSuccess) return give_up("instantiation", status);

  MOSAIC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  graphs_.push_front(Entry{std::move(signature), exec});
  last_capture_replayed_ = false;
  if (graphs_.size() > capacity_) {
    cudaGraphExecDestroy(graphs_.back().graph);
    graphs_.pop_back();
  }
  return true;
}

}  // namespace mosaic
