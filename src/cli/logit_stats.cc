#include "cli/logit_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mosaic::cli {

LogitStats logit_stats(std::span<const float> logits, int top_count) {
  LogitStats stats;
  if (logits.empty()) return stats;
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0, sum_sq = 0, exp_sum = 0, weighted = 0;
  for (const float value : logits) {
    sum += value;
    sum_sq += double(value) * value;
    const double e = std::exp(value - max);
    exp_sum += e;
    weighted += e * (value - max);
  }
  const double n = static_cast<double>(logits.size());
  stats.max = max;
  stats.mean = sum / n;
  stats.std = std::sqrt(std::max(0.0, sum_sq / n - stats.mean * stats.mean));
  stats.logsumexp = max + std::log(exp_sum);
  // H = -sum p log p with log p = (x - max) - log(exp_sum).
  stats.entropy = std::log(exp_sum) - weighted / exp_sum;

  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t count = std::min<size_t>(static_cast<size_t>(std::max(top_count, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + count, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  for (size_t i = 0; i < count; ++i)
    stats.top.push_back({order[i], logits[order[i]], std::exp(logits[order[i]] - stats.logsumexp)});
  return stats;
}

}  // namespace mosaic::cli
