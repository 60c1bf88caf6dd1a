// Summary of one row of logits for people: top tokens with probabilities, and the statistics
// a sampler cares about (log-sum-exp, entropy).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mosaic::cli {

struct TopToken {
  int32_t id = 0;
  float logit = 0;
  double probability = 0;
};

struct LogitStats {
  std::vector<TopToken> top;  // highest logits first; ties: lowest id first
  double max = 0, mean = 0, std = 0, logsumexp = 0, entropy = 0;  // entropy in nats
};

LogitStats logit_stats(std::span<const float> logits, int top_count);

}  // namespace mosaic::cli
