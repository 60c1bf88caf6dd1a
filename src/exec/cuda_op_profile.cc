#include "exec/cuda_op_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace mosaic {

CudaOpProfile::CudaOpProfile() {
  const char* value = std::getenv("MOSAIC_PROFILE_OPS");
  enabled_ = value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

CudaOpProfile::~CudaOpProfile() {
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
}

cudaEvent_t CudaOpProfile::event_at(size_t index) {
  while (events_.size() <= index) {
    cudaEvent_t event;
    MOSAIC_CUDA_CHECK(cudaEventCreate(&event));
    events_.push_back(event);
  }
  return events_[index];
}

void CudaOpProfile::begin(cudaStream_t stream) {
  if (!enabled_) return;
  labels_.clear();
  experts_used_.clear();
  MOSAIC_CUDA_CHECK(cudaEventRecord(event_at(0), stream));
}

void CudaOpProfile::count_experts(const int32_t* device_offsets, int64_t experts, cudaStream_t stream) {
  if (!enabled_) return;
  std::vector<int32_t> offsets(static_cast<size_t>(experts + 1));
  MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream));
  MOSAIC_CUDA_CHECK(cudaMemcpy(offsets.data(), device_offsets, offsets.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  int64_t used = 0;
  for (int64_t e = 0; e < experts; ++e) used += offsets[static_cast<size_t>(e + 1)] > offsets[static_cast<size_t>(e)];
  experts_used_.push_back(used);
  experts_ = experts;
}

void CudaOpProfile::mark(const std::string& label, cudaStream_t stream) {
  if (!enabled_) return;
  labels_.push_back(label);
  MOSAIC_CUDA_CHECK(cudaEventRecord(event_at(labels_.size()), stream));
}

void CudaOpProfile::report() {
  const size_t marks = labels_.size();
  if (!enabled_ || marks == 0) return;
  MOSAIC_CUDA_CHECK(cudaEventSynchronize(events_[marks]));
  std::map<std::string, std::pair<double, int>> totals;  // label -> (ms, ops)
  for (size_t i = 0; i < marks; ++i) {
    float ms = 0;
    MOSAIC_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
    auto& [sum, count] = totals[labels_[i]];
    sum += ms, ++count;
  }
  float step_ms = 0;
  MOSAIC_CUDA_CHECK(cudaEventElapsedTime(&step_ms, events_[0], events_[marks]));
  std::vector<std::pair<std::string, std::pair<double, int>>> sorted(totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string line = fmt::format("mosaic profile: step {:.2f} ms on the GPU", step_ms);
  for (const auto& [label, total] : sorted) {
    line += fmt::format(" | {} {:.2f} ms ({:.1f}%, {} ops)", label, total.first, 100.0 * total.first / step_ms,
                        total.second);
  }
  if (!experts_used_.empty()) {
    int64_t total = 0;
    for (const int64_t used : experts_used_) total += used;
    line += fmt::format(" | experts used: {:.1f} of {} per expert layer (mean of {}; {} in all)",
                        double(total) / double(experts_used_.size()), experts_, experts_used_.size(), total);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace mosaic
