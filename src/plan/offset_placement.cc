#include "plan/offset_placement.h"

#include <algorithm>
#include <limits>

namespace mosaic {

OffsetPlacer::OffsetPlacer(std::span<const TensorUsage> usages, uint64_t alignment)
    : usages_(usages), alignment_(alignment), offsets_(usages.size(), 0), sizes_(usages.size()) {
  for (size_t i = 0; i < usages.size(); ++i) sizes_[i] = align_up(usages[i].bytes, alignment);
  by_offset_.reserve(usages.size());
}

uint64_t OffsetPlacer::place(size_t index, GapChoice choice) {
  const TensorUsage& tensor = usages_[index];
  const uint64_t size = sizes_[index];
  if (size == 0) return 0;  // occupies nothing; offset 0 by convention

  uint64_t best_offset = 0, best_gap = std::numeric_limits<uint64_t>::max();
  bool found = false;
  uint64_t cursor = 0;  // end of the highest overlapping tensor seen so far
  for (const size_t other : by_offset_) {
    if (!tensor.overlaps(usages_[other])) continue;
    const uint64_t other_offset = offsets_[other];
    if (other_offset > cursor) {
      const uint64_t gap = other_offset - cursor;
      if (gap >= size && gap < best_gap) {
        best_offset = cursor, best_gap = gap, found = true;
        if (choice == GapChoice::first_fit) break;
      }
    }
    cursor = std::max(cursor, other_offset + sizes_[other]);
  }
  const uint64_t offset = found ? best_offset : cursor;
  offsets_[index] = offset;
  peak_ = std::max(peak_, offset + size);
  const auto position = std::upper_bound(by_offset_.begin(), by_offset_.end(), offset,
                                         [&](uint64_t value, size_t other) { return value < offsets_[other]; });
  by_offset_.insert(position, index);
  return offset;
}

MemoryPlan OffsetPlacer::finish() && { return MemoryPlan{std::move(offsets_), peak_}; }

}  // namespace mosaic
