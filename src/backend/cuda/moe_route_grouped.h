// The LLaDA 2.x router on the device (backend/cpu/moe_route_grouped.h gives the rule): fp32
// router logits and expert bias in, the chosen experts (ascending) and their renormalised, scaled
// weights out. A warp per row; no host sync.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mosaic::cuda {

// The largest group count the kernel takes (the released models have 8).
inline constexpr int64_t kMoeMaxRouterGroups = 32;

struct GroupedRouteArgs {
  int64_t rows = 0, experts = 0, k = 0, groups = 1, top_groups = 1;
  float scaling = 1.0f;
  const float* logits = nullptr;  int64_t logits_stride = 0;  // fp32 [rows, experts]
  const float* bias = nullptr;                                // fp32 [experts]
  int32_t* route_experts = nullptr;                           // [rows, k]
  float* route_weights = nullptr;                             // [rows, k]
};

// experts <= kMoeMaxExperts (moe.h), k <= kMoeMaxExpertsPerToken, groups <= kMoeMaxRouterGroups,
// at least 2 experts per group.
void moe_route_grouped(const GroupedRouteArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
