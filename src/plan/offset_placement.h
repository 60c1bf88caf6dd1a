// The step both greedy planners share: given the tensors already placed, put one more tensor
// into a gap among those whose lifetimes overlap it.
//
// Finding those tensors is the cost: a scan of every placed tensor makes planning quadratic.
// Placed tensors are therefore also filed in time windows of eight ops; a placement looks only
// at the windows its own lifetime spans. Transformer steps are long chains of short-lived
// tensors, so a window holds a handful of tensors however large the graph grows.
#pragma once

#include <span>
#include <vector>

#include "plan/tensor_usage.h"

namespace mosaic {

enum class GapChoice {
  first_fit,  // the lowest gap that is large enough
  best_fit,   // the smallest gap that is large enough (lowest on ties)
};

class OffsetPlacer {
 public:
  OffsetPlacer(std::span<const TensorUsage> usages, uint64_t alignment);

  // Places tensor `index` and returns its offset.
  uint64_t place(size_t index, GapChoice choice);

  MemoryPlan finish() &&;

 private:
  size_t window_of(int32_t op) const;

  std::span<const TensorUsage> usages_;
  uint64_t alignment_;
  std::vector<uint64_t> offsets_;
  std::vector<uint64_t> sizes_;                 // aligned sizes
  std::vector<std::vector<size_t>> windows_;    // placed tensors per time window
  int64_t ops_per_window_ = 1;
  std::vector<uint32_t> seen_;                  // de-duplication stamps, one per tensor
  uint32_t stamp_ = 0;
  std::vector<size_t> neighbours_;              // scratch: overlapping placed tensors
  uint64_t peak_ = 0;
};

}  // namespace mosaic
