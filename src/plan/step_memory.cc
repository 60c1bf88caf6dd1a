#include "plan/step_memory.h"

#include <algorithm>

#include "plan/live_bytes.h"

namespace mosaic {

StepMemory step_memory(std::span<const TensorUsage> usages, const MemoryPlan& plan, int32_t op_count) {
  StepMemory memory;
  memory.planned_peak = plan.peak_bytes;
  const std::vector<uint64_t> live = live_bytes_per_op(usages, op_count);
  if (live.empty()) return memory;
  const auto peak = std::max_element(live.begin(), live.end());
  memory.lower_bound = *peak;
  memory.peak_op = static_cast<int32_t>(peak - live.begin());
  long double sum = 0;
  for (const uint64_t bytes : live) sum += bytes;
  memory.average_live = static_cast<uint64_t>(sum / live.size());
  return memory;
}

StepMemory with_resident(StepMemory memory, uint64_t resident) {
  memory.planned_peak += resident, memory.lower_bound += resident, memory.average_live += resident;
  memory.resident += resident;
  return memory;
}

}  // namespace mosaic
