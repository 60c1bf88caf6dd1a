#include "gen/position_select.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mosaic {
namespace {

using ::testing::ElementsAre;

std::vector<int32_t> positions(const std::vector<RankedPosition>& ranked, const std::vector<size_t>& picked) {
  std::vector<int32_t> out;
  for (size_t i : picked) out.push_back(ranked[i].position);
  return out;
}

TEST(PositionSelect, TopKBreaksTiesByLowestPosition) {
  const std::vector<RankedPosition> ranked = {{149, 0.5}, {140, 0.5}, {145, 0.9}, {141, 0.5}, {150, 0.1}};
  EXPECT_THAT(positions(ranked, top_k_positions(ranked, 3)), ElementsAre(145, 140, 141));
  EXPECT_TRUE(top_k_positions(ranked, 0).empty());
  EXPECT_EQ(top_k_positions(ranked, 99).size(), 5u);
}

TEST(PositionSelect, ThresholdKeepsTheBestAndThoseAtOrAbove) {
  const std::vector<RankedPosition> ranked = {{1, 0.2}, {2, 0.9}, {3, 0.9}, {4, 0.95}, {5, 0.89}};
  EXPECT_THAT(positions(ranked, threshold_positions(ranked, 0.9)), ElementsAre(4, 2, 3));
  EXPECT_THAT(positions(ranked, threshold_positions(ranked, 0.99)), ElementsAre(4));  // the best always
  EXPECT_TRUE(threshold_positions({}, 0.5).empty());
}

TEST(PositionSelect, TopKOrAboveTakesAllAboveWhenEnoughElseTheTopK) {
  const std::vector<RankedPosition> ranked = {{1, 0.2}, {2, 0.96}, {3, 0.95}, {4, 0.99}, {5, 0.5}};
  // Two above 0.95 (strictly: 0.95 itself is not), k = 1: both.
  EXPECT_THAT(positions(ranked, top_k_or_above_positions(ranked, 1, 0.95)), ElementsAre(4, 2));
  // k = 3 > the two above: the top 3, whatever the bar.
  EXPECT_THAT(positions(ranked, top_k_or_above_positions(ranked, 3, 0.95)), ElementsAre(4, 2, 3));
  // k = 0: only those above the bar; none above 1.
  EXPECT_THAT(positions(ranked, top_k_or_above_positions(ranked, 0, 0.95)), ElementsAre(4, 2));
  EXPECT_TRUE(top_k_or_above_positions(ranked, 0, 1.0).empty());
  EXPECT_EQ(top_k_or_above_positions(ranked, 9, 1.0).size(), 5u);
}

TEST(PositionSelect, FactorRuleAndItsQuirks) {
  // f = 1: tau_2 = 1 - 1/3 = 0.667, tau_3 = 0.75, tau_4 = 0.8.
  const std::vector<RankedPosition> a = {{1, 0.95}, {2, 0.7}, {3, 0.7}, {4, 0.1}};
  EXPECT_THAT(positions(a, factor_positions(a, 1.0)), ElementsAre(1, 2));  // rank 3 fails: K = 2
  const std::vector<RankedPosition> b = {{1, 0.95}, {2, 0.9}, {3, 0.85}};
  EXPECT_EQ(factor_positions(b, 1.0).size(), 3u);                          // no failure: all
  const std::vector<RankedPosition> c = {{1, 0.95}, {2, 0.9}, {3, 0.1}};
  EXPECT_EQ(factor_positions(c, 1.0).size(), 3u);                          // fails at rank n: all
  const std::vector<RankedPosition> d = {{7, 0.01}};
  EXPECT_EQ(factor_positions(d, 1.0).size(), 1u);
}

}  // namespace
}  // namespace mosaic
