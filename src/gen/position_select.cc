#include "gen/position_select.h"

#include <algorithm>
#include <numeric>

namespace mosaic {
namespace {

std::vector<size_t> rank_order(const std::vector<RankedPosition>& ranked) {
  std::vector<size_t> order(ranked.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranked[a].score != ranked[b].score) return ranked[a].score > ranked[b].score;
    return ranked[a].position < ranked[b].position;
  });
  return order;
}

}  // namespace

std::vector<size_t> top_k_positions(const std::vector<RankedPosition>& ranked, int64_t k) {
  std::vector<size_t> order = rank_order(ranked);
  order.resize(static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(order.size()))));
  return order;
}

std::vector<size_t> threshold_positions(const std::vector<RankedPosition>& ranked, double threshold) {
  std::vector<size_t> order = rank_order(ranked);
  size_t keep = order.empty() ? 0 : 1;
  while (keep < order.size() && ranked[order[keep]].score >= threshold) ++keep;
  order.resize(keep);
  return order;
}

std::vector<size_t> top_k_or_above_positions(const std::vector<RankedPosition>& ranked, int64_t k, double threshold) {
  std::vector<size_t> order = rank_order(ranked);
  size_t keep = static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(order.size())));
  while (keep < order.size() && ranked[order[keep]].score > threshold) ++keep;
  order.resize(keep);
  return order;
}

std::vector<size_t> factor_positions(const std::vector<RankedPosition>& ranked, double factor) {
  std::vector<size_t> order = rank_order(ranked);
  const size_t n = order.size();
  if (n <= 1) return order;
  // Thresholds tau_1 = -1, tau_r = 1 - factor / (r + 1); K = first failing rank - 1, except that
  // no failure, or a first failure at rank n, keeps all n.
  size_t keep = n;
  for (size_t r = 1; r <= n; ++r) {
    const double tau = r == 1 ? -1.0 : 1.0 - factor / static_cast<double>(r + 1);
    if (ranked[order[r - 1]].score < tau) {
      keep = r == n ? n : r - 1;
      break;
    }
  }
  order.resize(keep);
  return order;
}

}  // namespace mosaic
