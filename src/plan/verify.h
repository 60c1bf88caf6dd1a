// Checks a plan the way ggml's allocator tests do, with three small predicates: every tensor
// placed and aligned, no two tensors that are live at the same op share a byte, and the peak
// is at least the live-bytes lower bound (and covers every tensor).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "plan/tensor_usage.h"

namespace mosaic {

// nullopt when the plan is valid; otherwise a description of the first violation.
std::optional<std::string> verify_plan(std::span<const TensorUsage> usages, const MemoryPlan& plan,
                                       uint64_t alignment = kPlanAlignment);

}  // namespace mosaic
