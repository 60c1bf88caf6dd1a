// The LLaDA 2.x router on the CPU (moe-models.md 2.3; graph/moe_ffn.h): sigmoid scores, an expert
// bias that chooses but does not weigh, group-limited top-k, renormalised and scaled weights.
#pragma once

#include <cstdint>

namespace mosaic::cpu {

struct GroupedRouting {
  int64_t experts = 0, k = 0;
  int64_t groups = 1, top_groups = 1;  // experts / groups per group, at least 2
  float scaling = 1.0f;                // routed_scaling_factor
};

// Per row, from router logits [rows, experts] (fp32, row stride logits_stride) and bias
// [experts]:
//   s[e] = sigmoid(logit[e]);  c[e] = s[e] + bias[e]  (the choosing score)
//   a group's score is the sum of its two largest c; the top_groups best groups are kept (equal
//   scores: the lower group first); the k largest c among their experts are chosen (equal: the
//   lower expert first);
//   weight[e] = s[e] / (sum of the chosen s + 1e-20) * scaling  (k = 1: s[e] * scaling, as the
//   HF gate renormalises only when it takes more than one expert).
// The chosen experts are written in ascending order with their weights: route_experts i32 and
// route_weights f32 [rows, k], contiguous.
void moe_route_grouped(int64_t rows, const GroupedRouting& routing, const float* logits, int64_t logits_stride,
                       const float* bias, int32_t* route_experts, float* route_weights);

}  // namespace mosaic::cpu
