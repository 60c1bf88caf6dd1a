// Greedy first-fit in birth order (the classic arena allocator run ahead of time, as
// ggml-alloc does it while walking the graph):
//  1. Order tensors by first_op (ties: larger first, then lower index).
//  2. For each, scan the already placed tensors whose lifetimes overlap it, in offset order,
//     and take the lowest gap that holds it.
//  3. With no such gap, place it after the highest of them.
// It is the baseline greedy-by-size is measured against.
#pragma once

#include <span>

#include "plan/tensor_usage.h"

namespace mosaic {

MemoryPlan plan_first_fit(std::span<const TensorUsage> usages, uint64_t alignment = kPlanAlignment);

}  // namespace mosaic
