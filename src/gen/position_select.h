// Which candidate positions a step unmasks, by the rules of docs/design/sampling.md. Ranking is
// by confidence, highest first; equal confidences rank the lower position first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mosaic {

struct RankedPosition {
  int32_t position;
  double score;
};

// Indices (into `ranked`) of the k highest scores, in rank order.
std::vector<size_t> top_k_positions(const std::vector<RankedPosition>& ranked, int64_t k);

// Fast-dLLM threshold rule: the best always, every other with score >= threshold.
std::vector<size_t> threshold_positions(const std::vector<RankedPosition>& ranked, double threshold);

// LLaDA 2.x's rule: if at least k scores are above threshold (strictly), all of those; otherwise
// the k highest (fewer when fewer are ranked). In rank order.
std::vector<size_t> top_k_or_above_positions(const std::vector<RankedPosition>& ranked, int64_t k, double threshold);

// Fast-dLLM factor rule (sampling.md §3, with the reference's quirks).
std::vector<size_t> factor_positions(const std::vector<RankedPosition>& ranked, double factor);

}  // namespace mosaic
