#include "plan/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "plan/live_bytes.h"

namespace mosaic {

std::optional<std::string> verify_plan(std::span<const TensorUsage> usages, const MemoryPlan& plan,
                                       uint64_t alignment) {
  if (plan.offsets.size() != usages.size())
    return fmt::format("{} offsets for {} tensors", plan.offsets.size(), usages.size());
  for (size_t i = 0; i < usages.size(); ++i) {
    if (plan.offsets[i] % alignment != 0)
      return fmt::format("tensor {} at offset {} is not {}-byte aligned", i, plan.offsets[i], alignment);
    if (plan.offsets[i] + usages[i].bytes > plan.peak_bytes)
      return fmt::format("tensor {} ends at {} beyond the peak {}", i,
                         plan.offsets[i] + usages[i].bytes, plan.peak_bytes);
  }
  // Sweep over ops: tensors sorted by first_op; an active set ordered by offset would be
  // O(n log n), but plans have at most a few thousand tensors, so pairwise within the active
  // window keeps this obviously correct.
  std::vector<size_t> order(usages.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return usages[a].first_op < usages[b].first_op; });
  for (size_t x = 0; x < order.size(); ++x) {
    const size_t a = order[x];
    if (usages[a].bytes == 0) continue;
    for (size_t y = x + 1; y < order.size() && usages[order[y]].first_op <= usages[a].last_op; ++y) {
      const size_t b = order[y];
      if (usages[b].bytes == 0) continue;
      const bool disjoint = plan.offsets[a] + usages[a].bytes <= plan.offsets[b] ||
                            plan.offsets[b] + usages[b].bytes <= plan.offsets[a];
      if (!disjoint)
        return fmt::format("tensors {} [{}, {}) and {} [{}, {}) are live together at op {} and overlap",
                           a, plan.offsets[a], plan.offsets[a] + usages[a].bytes, b,
                           plan.offsets[b], plan.offsets[b] + usages[b].bytes, usages[b].first_op);
    }
  }
  const uint64_t lower_bound = live_bytes_lower_bound(usages);
  if (plan.peak_bytes < lower_bound)
    return fmt::format("peak {} is below the lower bound {}", plan.peak_bytes, lower_bound);
  return std::nullopt;
}

}  // namespace mosaic
