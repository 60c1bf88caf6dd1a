#include "plan/live_bytes.h"

#include <algorithm>

#include "core/error.h"

namespace mosaic {

std::vector<uint64_t> live_bytes_per_op(std::span<const TensorUsage> usages, int32_t op_count) {
  // Difference array: +bytes at first_op, -bytes after last_op, then a prefix sum.
  std::vector<int64_t> delta(static_cast<size_t>(op_count) + 1, 0);
  for (const TensorUsage& usage : usages) {
    MOSAIC_ASSERT(usage.first_op >= 0 && usage.first_op <= usage.last_op && usage.last_op < op_count,
                  "usage [{}, {}] outside {} ops", usage.first_op, usage.last_op, op_count);
    delta[usage.first_op] += static_cast<int64_t>(usage.bytes);
    delta[usage.last_op + 1] -= static_cast<int64_t>(usage.bytes);
  }
  std::vector<uint64_t> live(static_cast<size_t>(op_count));
  int64_t running = 0;
  for (int32_t op = 0; op < op_count; ++op) {
    running += delta[op];
    live[op] = static_cast<uint64_t>(running);
  }
  return live;
}

uint64_t live_bytes_lower_bound(std::span<const TensorUsage> usages) {
  int32_t op_count = 0;
  for (const TensorUsage& usage : usages) op_count = std::max(op_count, usage.last_op + 1);
  const std::vector<uint64_t> live = live_bytes_per_op(usages, op_count);
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

}  // namespace mosaic
