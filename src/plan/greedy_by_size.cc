#include "plan/greedy_by_size.h"

#include <algorithm>
#include <numeric>

#include "plan/offset_placement.h"

namespace mosaic {

MemoryPlan plan_greedy_by_size(std::span<const TensorUsage> usages, uint64_t alignment) {
  std::vector<size_t> order(usages.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const uint64_t size_a = align_up(usages[a].bytes, alignment);
    const uint64_t size_b = align_up(usages[b].bytes, alignment);
    if (size_a != size_b) return size_a > size_b;
    return usages[a].first_op < usages[b].first_op;
  });
  OffsetPlacer placer(usages, alignment);
  for (const size_t index : order) placer.place(index, GapChoice::best_fit);
  return std::move(placer).finish();
}

}  // namespace mosaic
