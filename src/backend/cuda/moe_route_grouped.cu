// The LLaDA 2.x router, a warp per row (moe_route_grouped.h). Lane l holds experts l, l + 32, ...
// Each warp writes its row's choosing scores to shared memory so that lane g can add up group g's
// two best (groups are contiguous runs of experts); the kept groups are top_groups rounds of a
// warp argmax over the group scores, the experts k rounds over the kept experts' scores, both
// with ties to the lower index, as on the CPU.
#include "backend/cuda/moe_route_grouped.h"

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/moe.h"

namespace mosaic::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = static_cast<int>(kMoeMaxExperts / 32);

// The warp's best (value, index) among the lanes' candidates: the higher value, then the lower index.
__device__ void warp_argmax(float& value, int& index) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, index, offset);
    if (other > value || (other == value && other_index < index)) value = other, index = other_index;
  }
}

__global__ void __launch_bounds__(kWarps * 32) moe_route_grouped_kernel(GroupedRouteArgs args) {
  __shared__ float choosing[kWarps][kMoeMaxExperts];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int experts = static_cast<int>(args.experts), k = static_cast<int>(args.k);
  const int groups = static_cast<int>(args.groups), per_group = experts / groups;
  const int64_t warps = int64_t{gridDim.x} * kWarps;
  for (int64_t r = int64_t{blockIdx.x} * kWarps + warp; r < args.rows; r += warps) {
    const float* row = args.logits + r * args.logits_stride;
    float s[kMaxPerLane], c[kMaxPerLane];
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < experts) {
        s[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-row[e])));
        c[i] = __fadd_rn(s[i], args.bias[e]);
        choosing[warp][e] = c[i];
      }
    }
    __syncwarp();
    // Lane g < groups: group g's score, the sum of its two largest choosing scores.
    float group_score = -INFINITY;
    if (lane < groups) {
      float first = -INFINITY, second = -INFINITY;
      for (int e = lane * per_group; e < (lane + 1) * per_group; ++e) {
        const float value = choosing[warp][e];
        if (value > first) second = first, first = value;
        else if (value > second) second = value;
      }
      group_score = __fadd_rn(first, second);
    }
    __syncwarp();
    uint32_t kept = 0;  // bit g: group g kept
    for (int t = 0; t < args.top_groups; ++t) {
      float best = lane < groups && !(kept >> lane & 1u) ? group_score : -INFINITY;
      int best_group = lane < groups && !(kept >> lane & 1u) ? lane : 0x7fffffff;
      warp_argmax(best, best_group);
      kept |= 1u << best_group;
    }
    uint32_t chosen = 0;  // bit i: expert lane + 32 i taken
    int picked[kMoeMaxExpertsPerToken];
    float sum = 0.0f;
    for (int t = 0; t < k; ++t) {
      float best = -INFINITY;
      int best_expert = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) {
        const int e = lane + 32 * i;
        if (e < experts && (kept >> (e / per_group) & 1u) && !(chosen >> i & 1u) &&
            (c[i] > best || best_expert == 0x7fffffff))
          best = c[i], best_expert = e;
      }
      warp_argmax(best, best_expert);
      if (best_expert % 32 == lane) chosen |= 1u << (best_expert / 32);
      picked[t] = best_expert;
    }
    // The chosen experts' unbiased scores, summed in ascending expert order as on the CPU.
    if (lane == 0)
      for (int a = 1; a < k; ++a)
        for (int b = a; b > 0 && picked[b - 1] > picked[b]; --b) {
          const int e = picked[b]; picked[b] = picked[b - 1]; picked[b - 1] = e;
        }
    float own[kMoeMaxExpertsPerToken];
    for (int t = 0; t < k; ++t) {
      const int e = __shfl_sync(0xffffffffu, picked[t], 0);
      float value = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i)
        if (lane + 32 * i == e) value = s[i];
      for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
      own[t] = value;  // only one lane held it: the sum is exact
      sum = __fadd_rn(sum, value);
    }
    if (lane == 0) {
      const float denominator = __fadd_rn(sum, 1e-20f);
      for (int t = 0; t < k; ++t) {
        args.route_experts[r * k + t] = picked[t];
        const float weight = k > 1 ? __fdiv_rn(own[t], denominator) : own[t];
        args.route_weights[r * k + t] = __fmul_rn(weight, args.scaling);
      }
    }
    __syncwarp();
  }
}

}  // namespace

void moe_route_grouped(const GroupedRouteArgs& args, cudaStream_t stream) {
  if (args.rows <= 0) return;
  MOSAIC_CUDA_REQUIRE(args.experts >= 2 && args.experts <= kMoeMaxExperts && args.groups >= 1 &&
                      args.groups <= kMoeMaxRouterGroups && args.experts % args.groups == 0 &&
                      args.experts / args.groups >= 2);
  MOSAIC_CUDA_REQUIRE(args.top_groups >= 1 && args.top_groups <= args.groups && args.k >= 1 &&
                      args.k <= std::min(kMoeMaxExpertsPerToken, args.top_groups * (args.experts / args.groups)));
  MOSAIC_CUDA_REQUIRE(args.logits_stride >= args.experts && args.logits != nullptr && args.bias != nullptr);
  const int64_t blocks = std::min<int64_t>((args.rows + kWarps - 1) / kWarps, 4096);
  moe_route_grouped_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(args);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace mosaic::cuda
