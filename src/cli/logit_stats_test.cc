#include "cli/logit_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mosaic::cli {
namespace {

TEST(LogitStats, UniformRow) {
  const std::vector<float> logits(8, 2.0f);
  const LogitStats stats = logit_stats(logits, 3);
  EXPECT_NEAR(stats.entropy, std::log(8.0), 1e-12);
  EXPECT_NEAR(stats.logsumexp, 2.0 + std::log(8.0), 1e-12);
  ASSERT_EQ(stats.top.size(), 3u);
  EXPECT_EQ(stats.top[0].id, 0);  // ties: lowest id first
  EXPECT_EQ(stats.top[2].id, 2);
  EXPECT_NEAR(stats.top[0].probability, 0.125, 1e-12);
}

TEST(LogitStats, PeakedRow) {
  const std::vector<float> logits = {0.0f, std::log(3.0f), 0.0f};  // p = 0.2, 0.6, 0.2
  const LogitStats stats = logit_stats(logits, 5);
  ASSERT_EQ(stats.top.size(), 3u);
  EXPECT_EQ(stats.top[0].id, 1);
  EXPECT_NEAR(stats.top[0].probability, 0.6, 1e-6);
  EXPECT_NEAR(stats.entropy, -(0.6 * std::log(0.6) + 0.4 * std::log(0.2)), 1e-6);
  EXPECT_NEAR(stats.mean, std::log(3.0) / 3, 1e-6);
}

}  // namespace
}  // namespace mosaic::cli
