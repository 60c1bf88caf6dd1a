#include "plan/greedy_by_area.h"

#include <algorithm>
#include <numeric>

#include "plan/offset_placement.h"

namespace mosaic {

MemoryPlan plan_greedy_by_area(std::span<const TensorUsage> usages, uint64_t alignment) {
  std::vector<size_t> order(usages.size());
  std::iota(order.begin(), order.end(), 0);
  auto area = [&](size_t i) {
    return static_cast<long double>(align_up(usages[i].bytes, alignment)) *
           static_cast<long double>(usages[i].last_op - usages[i].first_op + 1);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const long double area_a = area(a), area_b = area(b);
    if (area_a != area_b) return area_a > area_b;
    if (usages[a].bytes != usages[b].bytes) return usages[a].bytes > usages[b].bytes;
    return usages[a].first_op < usages[b].first_op;
  });
  OffsetPlacer placer(usages, alignment);
  for (const size_t index : order) placer.place(index, GapChoice::best_fit);
  return std::move(placer).finish();
}

}  // namespace mosaic
