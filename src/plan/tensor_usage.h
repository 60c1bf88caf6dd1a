// The planner's whole view of a tensor: how many bytes it needs and during which ops it is live
// (TFLite's TensorUsageRecord). Offsets first, backing memory second, pointers last.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mosaic {

struct TensorUsage {
  uint64_t bytes = 0;
  int32_t first_op = 0;  // the op that writes it first
  int32_t last_op = 0;   // the last op that reads it (inclusive)

  bool overlaps(const TensorUsage& other) const {
    return first_op <= other.last_op && other.first_op <= last_op;
  }
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per usage, multiples of the alignment
  uint64_t peak_bytes = 0;        // max over tensors of offset + aligned size
};

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Offsets of tensors may be shared by their lifetime-disjoint neighbours; 256 B keeps every
// tensor aligned for vector loads on the CPU and coalesced access on the GPU.
inline constexpr uint64_t kPlanAlignment = 256;

}  // namespace mosaic
