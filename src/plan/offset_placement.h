// The step both greedy planners share: given the tensors already placed, put one more tensor
// into a gap among those whose lifetimes overlap it.
#pragma once

#include <vector>

#include "plan/tensor_usage.h"

namespace mosaic {

enum class GapChoice {
  first_fit,  // the lowest gap that is large enough
  best_fit,   // the smallest gap that is large enough (lowest on ties)
};

// Keeps placed tensors ordered by offset so a placement is one linear scan.
class OffsetPlacer {
 public:
  OffsetPlacer(std::span<const TensorUsage> usages, uint64_t alignment);

  // Places tensor `index` and returns its offset.
  uint64_t place(size_t index, GapChoice choice);

  MemoryPlan finish() &&;

 private:
  std::span<const TensorUsage> usages_;
  uint64_t alignment_;
  std::vector<uint64_t> offsets_;
  std::vector<uint64_t> sizes_;     // aligned sizes
  std::vector<size_t> by_offset_;   // placed tensors, ascending offset
  uint64_t peak_ = 0;
};

}  // namespace mosaic
