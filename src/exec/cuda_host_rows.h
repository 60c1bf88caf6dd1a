// The CUDA half of a residual stream in host memory (graph/residual_staging.h): the pinned buffer
// that holds the step's host tensors, and the copies of their rows.
//
//   stage_rows    an event on the step's stream marks the staged tensor's slot free (its earlier
//                 tenants are done, and so is every write-back enqueued before); a copy stream
//                 waits for it and copies the rows in; an event marks them arrived, and the first
//                 op that names the staged tensor makes the step's stream wait for it.
//   unstage_rows  a copy back on the step's stream itself: the ops after it (a slot's next
//                 tenant, a later stage of the same rows) are ordered after it for free.
//
// All of it is legal inside a stream capture, so a step's CUDA graph holds its copies.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace mosaic {

class CudaHostRows {
 public:
  CudaHostRows() = default;
  CudaHostRows(const CudaHostRows&) = delete;
  CudaHostRows& operator=(const CudaHostRows&) = delete;
  ~CudaHostRows();

  // Before a step's launches: pinned memory for every host tensor of `graph` (kept between
  // steps, grown when a step needs more), events for its stage ops, the copy stream. Throws
  // mosaic::Error naming the bytes when pinned memory cannot be had.
  void prepare(const Graph& graph);
  // Where host tensor `tensor` of the prepared graph lives (the device reaches it: unified
  // addressing). Null for any other tensor.
  void* host_address(int32_t tensor) const;
  // Per enqueue of the step's launches (a capture that fell back enqueues again): nothing arrived.
  void begin();
  // The stage op: `bytes` from `from` (host) to `to` (the staged tensor, `tensor`).
  void stage(int32_t tensor, void* to, const void* from, size_t bytes, cudaStream_t step);
  // The step's stream waits for `tensor`'s rows if a stage started them and nobody waited yet.
  void wait_for(int32_t tensor, cudaStream_t step);
  // The unstage op: `bytes` from `from` (a staged tensor) to `to` (host), on the step's stream.
  static void unstage(void* to, const void* from, size_t bytes, cudaStream_t step);
  uint64_t pinned_bytes() const { return capacity_; }

 private:
  void* pinned_ = nullptr;
  uint64_t capacity_ = 0;
  std::vector<uint64_t> offset_;  // per tensor of the prepared graph; UINT64_MAX: not a host tensor
  cudaStream_t copies_ = nullptr;
  // Per stage op of the step, in order: the slot's event and the rows' event.
  std::vector<cudaEvent_t> slot_free_, arrived_;
  size_t next_ = 0;
  std::vector<int32_t> pending_;  // per tensor: the arrived_ index to wait for, -1 none
};

}  // namespace mosaic

