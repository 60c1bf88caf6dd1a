#include "exec/cuda_host_rows.h"

#include <limits>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"
#include "core/format_bytes.h"

namespace mosaic {

CudaHostRows::~CudaHostRows() {
  if (copies_ != nullptr) cudaStreamSynchronize(copies_);
  for (auto* events : {&slot_free_, &arrived_})
    for (cudaEvent_t event : *events) cudaEventDestroy(event);
  if (copies_ != nullptr) cudaStreamDestroy(copies_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

void CudaHostRows::prepare(const Graph& graph) {
  offset_.assign(graph.tensors.size(), std::numeric_limits<uint64_t>::max());
  pending_.assign(graph.tensors.size(), -1);
  uint64_t bytes = 0;
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    if (!graph.tensors[t].host) continue;
    offset_[t] = bytes;
    bytes += (graph.tensors[t].bytes() + 255) / 256 * 256;
  }
  if (bytes == 0) return;
  if (bytes > capacity_) {
    if (pinned_ != nullptr) {
      MOSAIC_CUDA_CHECK(cudaFreeHost(pinned_));  // the last step that used it has finished
      pinned_ = nullptr, capacity_ = 0;
    }
    const cudaError_t status = cudaHostAlloc(&pinned_, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it: the engine goes on with other steps
      pinned_ = nullptr;
      fail("pinned host memory for the residual stream of a step of {} tokens ({}) cannot be allocated: {}",
           graph.tokens, format_bytes(bytes), cudaGetErrorString(status));
    }
    capacity_ = bytes;
  }
  size_t stages = 0;
  for (const GraphOp& op : graph.ops) stages += op.kind == OpKind::stage_rows;
  if (stages > 0 && copies_ == nullptr) MOSAIC_CUDA_CHECK(cudaStreamCreateWithFlags(&copies_, cudaStreamNonBlocking));
  while (arrived_.size() < stages) {
    cudaEvent_t slot = nullptr, rows = nullptr;
    MOSAIC_CUDA_CHECK(cudaEventCreateWithFlags(&slot, cudaEventDisableTiming));
    MOSAIC_CUDA_CHECK(cudaEventCreateWithFlags(&rows, cudaEventDisableTiming));
    slot_free_.push_back(slot), arrived_.push_back(rows);
  }
}

void* CudaHostRows::host_address(int32_t tensor) const {
  const uint64_t offset = offset_.at(static_cast<size_t>(tensor));
  if (offset == std::numeric_limits<uint64_t>::max()) return nullptr;
  return static_cast<std::byte*>(pinned_) + offset;
}

void CudaHostRows::begin() {
  next_ = 0;
  std::fill(pending_.begin(), pending_.end(), -1);
}

void CudaHostRows::stage(int32_t tensor, void* to, const void* from, size_t bytes, cudaStream_t step) {
  MOSAIC_ASSERT(next_ < arrived_.size(), "more stage ops than the step was prepared for");
  const size_t i = next_++;
  MOSAIC_CUDA_CHECK(cudaEventRecord(slot_free_[i], step));
  MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(copies_, slot_free_[i]));
  MOSAIC_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, copies_));
  MOSAIC_CUDA_CHECK(cudaEventRecord(arrived_[i], copies_));
  pending_.at(static_cast<size_t>(tensor)) = static_cast<int32_t>(i);
}

void CudaHostRows::wait_for(int32_t tensor, cudaStream_t step) {
  int32_t& pending = pending_.at(static_cast<size_t>(tensor));
  if (pending < 0) return;
  MOSAIC_CUDA_CHECK(cudaStreamWaitEvent(step, arrived_[static_cast<size_t>(pending)]));
  pending = -1;
}

void CudaHostRows::unstage(void* to, const void* from, size_t bytes, cudaStream_t step) {
  MOSAIC_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, step));
}

}  // namespace mosaic

