#include "gen/dream_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mosaic {
namespace {

using ::testing::ElementsAre;

// Token counts per step measured with PyTorch 2.11 on an H200 for the non-origin algorithms
// (shared/reference/sampling.md §2): the float32 schedule must reproduce them exactly.
std::vector<int64_t> counts(int64_t new_tokens, int64_t steps) {
  const std::vector<float> ts = dream_timesteps(steps, 1e-3);
  std::vector<int64_t> out;
  int64_t masked = new_tokens;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t n = dream_transfer_count(masked, ts, i);
    out.push_back(n);
    masked -= n;
  }
  return out;
}

TEST(DreamSchedule, MatchesMeasuredCounts) {
  EXPECT_THAT(counts(64, 8), ElementsAre(7, 8, 8, 8, 8, 8, 8, 9));
  const std::vector<int64_t> c512 = counts(512, 512);
  EXPECT_EQ(c512.front(), 0);
  for (size_t i = 1; i + 1 < c512.size(); ++i) ASSERT_EQ(c512[i], 1) << i;
  EXPECT_EQ(c512.back(), 2);
  const std::vector<int64_t> c256 = counts(256, 256);
  EXPECT_EQ(c256.front(), 0);
  EXPECT_EQ(c256.back(), 2);
  for (const auto& [tokens, steps] : {std::pair{256, 128}, std::pair{128, 64}}) {
    const std::vector<int64_t> c = counts(tokens, steps);
    EXPECT_EQ(c[0], 1);
    EXPECT_EQ(c[1], 2);
    EXPECT_EQ(c.back(), 3);
  }
}

TEST(DreamSchedule, EndpointsAndTransferProbability) {
  const std::vector<float> ts = dream_timesteps(10, 1e-3);
  EXPECT_EQ(ts.front(), 1.0f);
  EXPECT_EQ(ts.back(), 1e-3f);
  EXPECT_EQ(dream_transfer_probability(ts, 9), 1.0f);
  EXPECT_NEAR(dream_transfer_probability(ts, 0), 1.0f - ts[1] / ts[0], 0.0f);
}

TEST(LladaQuota, SpreadsTheRemainderOverTheFirstSteps) {
  std::vector<int64_t> q;
  for (int64_t i = 0; i < 4; ++i) q.push_back(llada_quota(10, 4, i));
  EXPECT_THAT(q, ElementsAre(3, 3, 2, 2));
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(llada_quota(3, 8, i), i < 3 ? 1 : 0);
}

}  // namespace
}  // namespace mosaic
