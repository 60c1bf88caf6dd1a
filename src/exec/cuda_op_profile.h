// A developer's profile of CUDA steps: with MOSAIC_PROFILE_OPS=1 in the environment, every step
// of CudaExecutor records an event after each op and prints to stderr the GPU time per op kind
// (linear ops per weight role), largest first, and for a mixture of experts how many experts its
// rows chose per layer (what the step's expert products must read). Off, it costs nothing. For
// finding where a step's time goes without a system profiler (docs/PERFORMANCE.md shows a
// breakdown made with it).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace mosaic {

class CudaOpProfile {
 public:
  CudaOpProfile();  // reads MOSAIC_PROFILE_OPS once
  ~CudaOpProfile();
  CudaOpProfile(const CudaOpProfile&) = delete;
  CudaOpProfile& operator=(const CudaOpProfile&) = delete;

  bool enabled() const { return enabled_; }
  // Starts a step's timeline on `stream`.
  void begin(cudaStream_t stream);
  // Closes the op enqueued since the previous mark (or begin) under `label`.
  void mark(const std::string& label, cudaStream_t stream);
  // A mixture-of-experts layer's permutation offsets [experts + 1] on the device, once the op
  // that wrote them is enqueued on `stream`: counts the experts with at least one row (waits for
  // the stream; profiled steps are slow anyway).
  void count_experts(const int32_t* device_offsets, int64_t experts, cudaStream_t stream);
  // After the stream has been synchronised: prints the step's totals per label.
  void report();

 private:
  cudaEvent_t event_at(size_t index);

  bool enabled_ = false;
  std::vector<cudaEvent_t> events_;  // reused across steps
  std::vector<std::string> labels_;  // this step's marks: labels_[i] ends at events_[i + 1]
  std::vector<int64_t> experts_used_;  // this step's, per expert layer and FFN chunk
  int64_t experts_ = 0;
};

}  // namespace mosaic
