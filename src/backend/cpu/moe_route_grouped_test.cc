// The LLaDA 2.x router against a direct double computation written the other way round: every
// expert's rank is decided by brute force (the groups kept by sorting group sums, the experts by
// counting who beats whom), and hand cases for what the rule is about: a strong expert in a
// dropped group is not chosen, the bias chooses but does not weigh, the weights sum to the
// scaling factor.
#include "backend/cpu/moe_route_grouped.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace mosaic::cpu {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const GroupedRouting& routing, const std::vector<float>& logits, const std::vector<float>& bias,
             int64_t rows) {
  Routed out{std::vector<int32_t>(rows * routing.k), std::vector<float>(rows * routing.k)};
  moe_route_grouped(rows, routing, logits.data(), routing.experts, bias.data(), out.experts.data(),
                    out.weights.data());
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(MoeRouteGrouped, MatchesABruteForceChoice) {
  const GroupedRouting routing{.experts = 32, .k = 5, .groups = 8, .top_groups = 3, .scaling = 2.5f};
  constexpr int64_t kRows = 64;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> logits(kRows * routing.experts), bias(routing.experts);
  for (float& x : logits) x = dist(rng);
  for (float& b : bias) b = 0.2f * dist(rng);
  const Routed got = route(routing, logits, bias, kRows);
  const int64_t per_group = routing.experts / routing.groups;
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<double> s(routing.experts), c(routing.experts), group(routing.groups);
    for (int64_t e = 0; e < routing.experts; ++e) {
      s[e] = sigmoid(logits[r * routing.experts + e]);
      c[e] = s[e] + bias[e];
    }
    for (int64_t g = 0; g < routing.groups; ++g) {
      std::vector<double> members(c.begin() + g * per_group, c.begin() + (g + 1) * per_group);
      std::sort(members.rbegin(), members.rend());
      group[g] = members[0] + members[1];
    }
    // A group is kept when fewer than top_groups groups score more than it.
    std::vector<int32_t> want;
    for (int64_t e = 0; e < routing.experts; ++e) {
      const int64_t g = e / per_group;
      const auto better_groups = std::count_if(group.begin(), group.end(), [&](double x) { return x > group[g]; });
      if (better_groups >= routing.top_groups) continue;
      int64_t better = 0;
      for (int64_t f = 0; f < routing.experts; ++f) {
        const auto better_f = std::count_if(group.begin(), group.end(), [&](double x) { return x > group[f / per_group]; });
        if (better_f < routing.top_groups && c[f] > c[e]) ++better;
      }
      if (better < routing.k) want.push_back(static_cast<int32_t>(e));
    }
    ASSERT_EQ(static_cast<int64_t>(want.size()), routing.k) << "row " << r << " has a tie; pick another seed";
    double sum = 0;
    for (int32_t e : want) sum += s[e];
    for (int64_t j = 0; j < routing.k; ++j) {
      EXPECT_EQ(got.experts[r * routing.k + j], want[j]) << "row " << r;
      EXPECT_NEAR(got.weights[r * routing.k + j], s[want[j]] / sum * 2.5, 1e-6) << "row " << r;
    }
  }
}

TEST(MoeRouteGrouped, AStrongExpertInADroppedGroupIsNotChosen) {
  // 2 groups of 4, keep 1, top 2. Group 1 holds the single best expert (7), but group 0's two
  // best sum higher, so both choices come from group 0.
  const GroupedRouting routing{.experts = 8, .k = 2, .groups = 2, .top_groups = 1, .scaling = 1.0f};
  const std::vector<float> logits = {2.0f, 1.9f, -3, -3, -3, -3, -3, 4.0f};
  const Routed got = route(routing, logits, std::vector<float>(8, 0.0f), 1);
  EXPECT_EQ(got.experts, (std::vector<int32_t>{0, 1}));
}

TEST(MoeRouteGrouped, TheBiasChoosesButDoesNotWeigh) {
  const GroupedRouting routing{.experts = 4, .k = 2, .groups = 1, .top_groups = 1, .scaling = 2.5f};
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -1.0f};
  std::vector<float> bias = {0, 0, 0, 5.0f};  // lifts expert 3 above all
  const Routed got = route(routing, logits, bias, 1);
  ASSERT_EQ(got.experts, (std::vector<int32_t>{0, 3}));
  const double s0 = sigmoid(1.0), s3 = sigmoid(-1.0);
  EXPECT_NEAR(got.weights[0], s0 / (s0 + s3) * 2.5, 1e-6);
  EXPECT_NEAR(got.weights[1], s3 / (s0 + s3) * 2.5, 1e-6);
  EXPECT_NEAR(got.weights[0] + got.weights[1], 2.5, 1e-6);
}

TEST(MoeRouteGrouped, OneExpertIsNotRenormalised) {
  const GroupedRouting routing{.experts = 4, .k = 1, .groups = 2, .top_groups = 1, .scaling = 2.5f};
  const std::vector<float> logits = {-1.0f, 0.5f, -2.0f, 0.25f};  // group 0 sums higher
  const Routed got = route(routing, logits, std::vector<float>(4, 0.0f), 1);
  ASSERT_EQ(got.experts, (std::vector<int32_t>{1}));
  EXPECT_NEAR(got.weights[0], sigmoid(0.5) * 2.5, 1e-6);
}

TEST(MoeRouteGrouped, EqualScoresChooseTheLowerGroupAndExpert) {
  const GroupedRouting routing{.experts = 8, .k = 2, .groups = 4, .top_groups = 2, .scaling = 1.0f};
  const std::vector<float> logits(8, 0.25f);
  const Routed got = route(routing, logits, std::vector<float>(8, 0.0f), 1);
  EXPECT_EQ(got.experts, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(got.weights[0], got.weights[1]);
}

}  // namespace
}  // namespace mosaic::cpu
