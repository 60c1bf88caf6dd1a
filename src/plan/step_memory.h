// The memory figures every benchmark reports for a planned step (ARCHITECTURE.md, "Measuring"):
// planned peak, lower bound (max live bytes over ops), average live bytes over ops,
// PAR = peak / average, inflation = peak / lower bound.
#pragma once

#include <span>

#include "plan/tensor_usage.h"

namespace mosaic {

// Device bytes a CUDA engine keeps beside weights and arena for cuBLASLt's workspace and the
// per-step index and sampling buffers: what plans for the GPU reserve, and what the CUDA step
// runner keeps out of a budget's activation share.
inline constexpr uint64_t kCudaWorkspaceReserveBytes = uint64_t{64} << 20;

struct StepMemory {
  uint64_t planned_peak = 0;
  uint64_t lower_bound = 0;
  uint64_t average_live = 0;
  int32_t peak_op = 0;  // the op where live bytes reach the lower bound
  // Bytes of resident tensors (a cached step's KV cache), live at every op: included in the
  // three figures above once with_resident() has added them.
  uint64_t resident = 0;

  double par() const { return average_live ? double(planned_peak) / double(average_live) : 0.0; }
  double inflation() const { return lower_bound ? double(planned_peak) / double(lower_bound) : 0.0; }
};

StepMemory step_memory(std::span<const TensorUsage> usages, const MemoryPlan& plan, int32_t op_count);

// The figures of a step whose resident tensors (live throughout) hold `resident` bytes beside
// the arena's plan: peak, lower bound and average all grow by them.
StepMemory with_resident(StepMemory memory, uint64_t resident);

}  // namespace mosaic
