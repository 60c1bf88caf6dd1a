#include "backend/cpu/moe_route_grouped.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace mosaic::cpu {

void moe_route_grouped(int64_t rows, const GroupedRouting& routing, const float* logits, int64_t logits_stride,
                       const float* bias, int32_t* route_experts, float* route_weights) {
  const int64_t E = routing.experts, K = routing.k, G = routing.groups;
  MOSAIC_ASSERT(G >= 1 && E % G == 0 && E / G >= 2 && routing.top_groups >= 1 && routing.top_groups <= G &&
                    K >= 1 && K <= routing.top_groups * (E / G),
                "moe_route_grouped: {} experts in {} groups, {} kept, top {}", E, G, routing.top_groups, K);
  const int64_t per_group = E / G;
#pragma omp parallel
  {
    std::vector<float> s(static_cast<size_t>(E)), choose(static_cast<size_t>(E)), group_score(static_cast<size_t>(G));
    std::vector<int32_t> groups(static_cast<size_t>(G)), candidates;
    candidates.reserve(static_cast<size_t>(E));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits + r * logits_stride;
      for (int64_t e = 0; e < E; ++e) {
        s[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-row[e]));
        choose[static_cast<size_t>(e)] = s[static_cast<size_t>(e)] + bias[e];
      }
      for (int64_t g = 0; g < G; ++g) {
        float first = -INFINITY, second = -INFINITY;
        for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
          const float value = choose[static_cast<size_t>(e)];
          if (value > first) second = first, first = value;
          else if (value > second) second = value;
        }
        group_score[static_cast<size_t>(g)] = first + second;
      }
      std::iota(groups.begin(), groups.end(), 0);
      const auto higher = [](const std::vector<float>& score) {
        return [&score](int32_t a, int32_t b) {
          const float sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
          return sa > sb || (sa == sb && a < b);
        };
      };
      std::partial_sort(groups.begin(), groups.begin() + routing.top_groups, groups.end(), higher(group_score));
      candidates.clear();
      for (int64_t i = 0; i < routing.top_groups; ++i)
        for (int64_t e = groups[static_cast<size_t>(i)] * per_group; e < (groups[static_cast<size_t>(i)] + 1) * per_group; ++e)
          candidates.push_back(static_cast<int32_t>(e));
      std::partial_sort(candidates.begin(), candidates.begin() + K, candidates.end(), higher(choose));
      std::sort(candidates.begin(), candidates.begin() + K);
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) sum += s[static_cast<size_t>(candidates[static_cast<size_t>(j)])];
      const float denominator = sum + 1e-20f;
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = candidates[static_cast<size_t>(j)];
        route_experts[r * K + j] = e;
        const float weight = K > 1 ? s[static_cast<size_t>(e)] / denominator : s[static_cast<size_t>(e)];
        route_weights[r * K + j] = weight * routing.scaling;
      }
    }
  }
}

}  // namespace mosaic::cpu
