#include "gen/host_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/philox.h"

namespace mosaic {

void sample_logits_row(std::span<const float> logits, const HeadRowSampling& how,
                       const RowFilter& filter, float* out) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::vector<double> s(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) s[v] = double(logits[v]) * how.stats_scale;

  std::vector<bool> kept(static_cast<size_t>(vocab), true);
  if (filter.top_p && *filter.top_p < 1) {
    std::vector<int64_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
    double z = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp(s[v] - s[order[0]]);
    double cumulative = 0;
    for (size_t rank = 0; rank < order.size(); ++rank) {
      // Removed when the mass *before* this entry already exceeds p (the reference's shifted
      // mask): the first entry is always kept.
      if (rank > 0 && cumulative > *filter.top_p) kept[order[rank]] = false;
      cumulative += std::exp(s[order[rank]] - s[order[0]]) / z;
    }
  }
  if (filter.top_k && *filter.top_k < vocab) {
    std::vector<double> values;
    for (int64_t v = 0; v < vocab; ++v) values.push_back(kept[v] ? s[v] : kNegInf);
    std::nth_element(values.begin(), values.begin() + (*filter.top_k - 1), values.end(), std::greater<>());
    const double kth = values[*filter.top_k - 1];
    for (int64_t v = 0; v < vocab; ++v)
      if (s[v] < kth) kept[v] = false;
  }

  double best = kNegInf, max = kNegInf, second = kNegInf;
  int64_t chosen = -1, argmax = -1, second_id = -1;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!kept[v]) continue;
    if (!how.choice_banned(v)) {
      const double score =
          how.choice_inv_temperature > 0
              ? double(logits[v]) * how.choice_inv_temperature +
                    rng_gumbel(how.seed, RngStream::gumbel_token, static_cast<uint32_t>(v), how.position, how.step)
              : double(logits[v]);
      if (score > best) best = score, chosen = v;
    }
    if (how.stats_banned(v)) continue;
    if (s[v] > max) second = max, second_id = argmax, max = s[v], argmax = v;
    else if (s[v] > second) second = s[v], second_id = v;
  }
  double z = 0, zs = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!kept[v] || how.stats_banned(v)) continue;
    const double e = std::exp(s[v] - max);
    z += e;
    zs += e * s[v];
  }
  out[kHeadChosen] = static_cast<float>(chosen);
  out[kHeadChosenLogit] = static_cast<float>(chosen >= 0 ? double(logits[chosen]) * how.stats_scale : kNegInf);
  out[kHeadMax] = static_cast<float>(max);
  out[kHeadArgmax] = static_cast<float>(argmax);
  out[kHeadLogSumExp] = static_cast<float>(max + std::log(z));
  out[kHeadMeanLogit] = static_cast<float>(zs / z);
  out[kHeadSecond] = static_cast<float>(second);
  out[kHeadSecondId] = static_cast<float>(second_id);
}

}  // namespace mosaic
