// Greedy-by-size offset assignment (Pisarchyk & Lee, "Efficient Memory Management for Deep
// Neural Net Inference", 2020; TFLite's GreedyBySizeAssignment):
//  1. Order tensors by aligned size, largest first (ties: earlier first_op, then lower index).
//  2. For each, scan the already placed tensors whose lifetimes overlap it, in offset order,
//     and take the smallest gap between them that holds it (best fit).
//  3. With no such gap, place it after the highest of them.
// Large tensors claim space first, so small ones fill the holes they leave; on transformer
// graphs this lands within a few percent of the live-bytes lower bound.
#pragma once

#include <span>

#include "plan/tensor_usage.h"

namespace mosaic {

MemoryPlan plan_greedy_by_size(std::span<const TensorUsage> usages,
                               uint64_t alignment = kPlanAlignment);

}  // namespace mosaic
