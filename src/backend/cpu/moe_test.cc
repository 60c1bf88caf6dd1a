// The MoE kernels against direct double computations: routing picks the k most probable experts
// of a softmax (ties to the lower expert) in expert order without renormalising; the permutation
// groups rows by expert; the combine adds each row's experts' outputs weighted.
#include "backend/cpu/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace mosaic::cpu {
namespace {

TEST(MoeRoute, TopKOfTheSoftmaxInExpertOrder) {
  constexpr int64_t kRows = 50, kExperts = 9, kK = 3, kStride = 11;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> logits(kRows * kStride);
  for (float& x : logits) x = dist(rng);
  std::vector<int32_t> experts(kRows * kK);
  std::vector<float> weights(kRows * kK);
  moe_route(kRows, kExperts, kK, logits.data(), kStride, experts.data(), weights.data());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* row = logits.data() + r * kStride;
    double sum = 0;
    for (int64_t e = 0; e < kExperts; ++e) sum += std::exp(double(row[e]));
    std::vector<int32_t> order(kExperts);
    for (int32_t e = 0; e < kExperts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    std::vector<int32_t> want(order.begin(), order.begin() + kK);
    std::sort(want.begin(), want.end());
    for (int64_t j = 0; j < kK; ++j) {
      EXPECT_EQ(experts[r * kK + j], want[j]) << "row " << r;
      EXPECT_NEAR(weights[r * kK + j], std::exp(double(row[want[j]])) / sum, 1e-6) << "row " << r;
    }
  }
}

TEST(MoeRoute, EqualLogitsChooseTheLowerExperts) {
  const std::vector<float> logits = {1, 3, 3, 3, 0};
  std::vector<int32_t> experts(2);
  std::vector<float> weights(2);
  moe_route(1, 5, 2, logits.data(), 5, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(weights[0], weights[1]);
}

TEST(MoePermute, GroupsRowsByExpertInRowOrder) {
  // Rows 0..3, two experts each, of 4 experts.
  const std::vector<int32_t> route = {0, 2, 1, 2, 0, 3, 2, 3};
  std::vector<int32_t> rows(4 + 1 + 8), slots(8);
  moe_permute(4, 4, 2, route.data(), rows.data(), slots.data());
  EXPECT_EQ(std::vector<int32_t>(rows.begin(), rows.begin() + 5), (std::vector<int32_t>{0, 2, 3, 6, 8}));
  EXPECT_EQ(std::vector<int32_t>(rows.begin() + 5, rows.end()), (std::vector<int32_t>{0, 2, 1, 0, 1, 3, 2, 3}));
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(rows[5 + slots[i]], i / 2) << "pair " << i;
  // Each slot is used once.
  std::vector<int32_t> sorted = slots;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t i = 0; i < 8; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(MoeCombine, AddsTheWeightedExpertOutputs) {
  constexpr int64_t kRows = 3, kHidden = 5, kK = 2;
  std::vector<float> x(kRows * kHidden, 1.0f), y(kRows * kK * kHidden);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i) * 0.25f;
  const std::vector<float> weights = {0.5f, 0.25f, 1.0f, 2.0f, 0.0f, 0.125f};
  const std::vector<int32_t> slots = {5, 0, 1, 4, 2, 3};
  moe_combine(kRows, kHidden, kK, x.data(), kHidden, y.data(), kHidden, weights.data(), slots.data());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t d = 0; d < kHidden; ++d) {
      double want = 1.0;
      for (int64_t j = 0; j < kK; ++j) want += weights[r * kK + j] * y[slots[r * kK + j] * kHidden + d];
      EXPECT_FLOAT_EQ(x[r * kHidden + d], want) << r << "," << d;
    }
}

}  // namespace
}  // namespace mosaic::cpu
