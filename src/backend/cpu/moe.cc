#include "backend/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mosaic::cpu {

void moe_route(int64_t rows, int64_t experts, int64_t k, const float* logits, int64_t logits_stride,
               int32_t* route_experts, float* route_weights) {
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(experts));         // this thread's row of probabilities
    std::vector<int32_t> order(static_cast<size_t>(experts));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits + r * logits_stride;
      float max = row[0];
      for (int64_t e = 1; e < experts; ++e) max = std::max(max, row[e]);
      float sum = 0.0f;
      for (int64_t e = 0; e < experts; ++e) {
        p[static_cast<size_t>(e)] = std::exp(row[e] - max);
        sum += p[static_cast<size_t>(e)];
      }
      for (float& value : p) value /= sum;
      std::iota(order.begin(), order.end(), 0);
      // The k most probable, the lower expert first among equals; then in expert order.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] || (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b);
      });
      std::sort(order.begin(), order.begin() + k);
      for (int64_t j = 0; j < k; ++j) {
        route_experts[r * k + j] = order[static_cast<size_t>(j)];
        route_weights[r * k + j] = p[static_cast<size_t>(order[static_cast<size_t>(j)])];
      }
    }
  }
}

void moe_permute(int64_t rows, int64_t experts, int64_t k, const int32_t* route_experts,
                 int32_t* expert_rows, int32_t* route_slots) {
  int32_t* offsets = expert_rows;
  int32_t* sources = expert_rows + experts + 1;
  std::fill(offsets, offsets + experts + 1, 0);
  for (int64_t i = 0; i < rows * k; ++i) ++offsets[route_experts[i] + 1];
  for (int64_t e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> filled(offsets, offsets + experts);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t slot = filled[static_cast<size_t>(route_experts[r * k + j])]++;
      sources[slot] = static_cast<int32_t>(r);
      route_slots[r * k + j] = slot;
    }
}

void moe_combine(int64_t rows, int64_t hidden, int64_t k, float* x, int64_t x_stride, const float* y,
                 int64_t y_stride, const float* route_weights, const int32_t* route_slots) {
#pragma omp parallel
  {
    std::vector<float> sum(static_cast<size_t>(hidden));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float w = route_weights[r * k + j];
        const float* expert = y + int64_t{route_slots[r * k + j]} * y_stride;
        for (int64_t d = 0; d < hidden; ++d) sum[static_cast<size_t>(d)] += w * expert[d];
      }
      float* out = x + r * x_stride;
      for (int64_t d = 0; d < hidden; ++d) out[d] += sum[static_cast<size_t>(d)];
    }
  }
}

}  // namespace mosaic::cpu
