// Live bytes over the op timeline: the lower bound any plan must meet, and the average that
// defines PAR (peak / average).
#pragma once

#include <span>
#include <vector>

#include "plan/tensor_usage.h"

namespace mosaic {

// live[op] = sum of the (unaligned) bytes of tensors live at op, for op in [0, op_count).
std::vector<uint64_t> live_bytes_per_op(std::span<const TensorUsage> usages, int32_t op_count);

// max over ops of live bytes: no offset assignment can have a smaller peak.
uint64_t live_bytes_lower_bound(std::span<const TensorUsage> usages);

}  // namespace mosaic
