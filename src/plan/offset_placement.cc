#include "plan/offset_placement.h"

#include <algorithm>
#include <limits>

namespace mosaic {
namespace {

// About eight ops per window: a window then holds the few tensors alive around those ops plus
// the long-lived ones (residual, K and V of the layer), however large the graph grows.
constexpr int64_t kOpsPerWindow = 8;

}  // namespace

OffsetPlacer::OffsetPlacer(std::span<const TensorUsage> usages, uint64_t alignment)
    : usages_(usages),
      alignment_(alignment),
      offsets_(usages.size(), 0),
      sizes_(usages.size()),
      seen_(usages.size(), 0) {
  int64_t op_count = 1;
  for (size_t i = 0; i < usages.size(); ++i) {
    sizes_[i] = align_up(usages[i].bytes, alignment);
    op_count = std::max<int64_t>(op_count, int64_t{usages[i].last_op} + 1);
  }
  ops_per_window_ = kOpsPerWindow;
  windows_.resize(static_cast<size_t>((op_count + ops_per_window_ - 1) / ops_per_window_));
}

size_t OffsetPlacer::window_of(int32_t op) const { return static_cast<size_t>(op / ops_per_window_); }

uint64_t OffsetPlacer::place(size_t index, GapChoice choice) {
  const TensorUsage& tensor = usages_[index];
  const uint64_t size = sizes_[index];
  if (size == 0) return 0;  // occupies nothing; offset 0 by convention

  // Placed tensors live at the same time as this one, in offset order.
  ++stamp_;
  neighbours_.clear();
  const size_t first_window = window_of(tensor.first_op), last_window = window_of(tensor.last_op);
  for (size_t w = first_window; w <= last_window; ++w)
    for (const size_t other : windows_[w])
      if (seen_[other] != stamp_) {
        seen_[other] = stamp_;
        if (tensor.overlaps(usages_[other])) neighbours_.push_back(other);
      }
  std::sort(neighbours_.begin(), neighbours_.end(), [&](size_t a, size_t b) {
    return offsets_[a] != offsets_[b] ? offsets_[a] < offsets_[b] : a < b;
  });

  uint64_t best_offset = 0, best_gap = std::numeric_limits<uint64_t>::max();
  bool found = false;
  uint64_t cursor = 0;  // end of the highest neighbour seen so far
  for (const size_t other : neighbours_) {
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
  for (size_t w = first_window; w <= last_window; ++w) windows_[w].push_back(index);
  return offset;
}

MemoryPlan OffsetPlacer::finish() && { return MemoryPlan{std::move(offsets_), peak_}; }

}  // namespace mosaic
