#include "plan/first_fit.h"

#include <algorithm>
#include <numeric>

#include "plan/offset_placement.h"

namespace mosaic {

MemoryPlan plan_first_fit(std::span<const TensorUsage> usages, uint64_t alignment) {
  std::vector<size_t> order(usages.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (usages[a].first_op != usages[b].first_op) return usages[a].first_op < usages[b].first_op;
    return usages[a].bytes > usages[b].bytes;
  });
  OffsetPlacer placer(usages, alignment);
  for (const size_t index : order) placer.place(index, GapChoice::first_fit);
  return std::move(placer).finish();
}

}  // namespace mosaic
