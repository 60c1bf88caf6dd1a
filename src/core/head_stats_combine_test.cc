// Combining per-part head summaries against the statistics of the whole row computed directly
// (two passes over every id, in double), with ties across parts and ids left out.
#include "core/head_stats_combine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/head_sampling.h"

namespace mosaic {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The summaries of ids [begin, end) of one row, directly: scores pick the chosen id, values
// outside `left_out` make the statistics.
std::vector<float> summarise(const std::vector<float>& values, const std::vector<float>& scores, int64_t begin,
                             int64_t end, int64_t left_out) {
  std::vector<float> s(kHeadPartialCount, 0);
  double best = kNegInf, max = kNegInf;
  int64_t chosen = -1, argmax = -1;
  for (int64_t v = begin; v < end; ++v) {
    if (scores[v] > best) best = scores[v], chosen = v;
    if (v != left_out && values[v] > max) max = values[v], argmax = v;
  }
  double second = kNegInf, sum = 0, sum_s = 0;
  int64_t second_id = -1;
  for (int64_t v = begin; v < end; ++v) {
    if (v == left_out) continue;
    if (v != argmax && values[v] > second) second = values[v], second_id = v;
    sum += std::exp(double(values[v]) - max);
    sum_s += std::exp(double(values[v]) - max) * values[v];
  }
  s[kHeadChosen] = static_cast<float>(chosen);
  s[kHeadChosenLogit] = chosen >= 0 ? values[chosen] : 0;
  s[kHeadMax] = static_cast<float>(max);
  s[kHeadArgmax] = static_cast<float>(argmax);
  s[kHeadLogSumExp] = static_cast<float>(max + std::log(sum));
  s[kHeadMeanLogit] = static_cast<float>(sum_s / sum);
  s[kHeadSecond] = static_cast<float>(second);
  s[kHeadSecondId] = static_cast<float>(second_id);
  s[kHeadChosenScore] = static_cast<float>(best);
  return s;
}

TEST(HeadStatsCombine, PartsCombineToTheWholeRowsStatistics) {
  constexpr int64_t kVocab = 48, kParts = 4, kRows = 3;
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0, 2);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> partials(kParts * kRows * kHeadPartialCount), expected;
    std::vector<std::vector<float>> whole;
    for (int64_t r = 0; r < kRows; ++r) {
      std::vector<float> values(kVocab), scores(kVocab);
      for (int64_t v = 0; v < kVocab; ++v) values[v] = std::round(normal(random) * 2) / 2, scores[v] = values[v] + normal(random);
      // Ties across parts: the maximum in part 1 and part 2, the chosen score too.
      if (trial % 2 == 0) values[20] = values[30] = 9, scores[13] = scores[40] = 12;
      const int64_t left_out = trial % 3 == 0 ? 20 : -1;
      for (int64_t k = 0; k < kParts; ++k) {
        const std::vector<float> s = summarise(values, scores, k * kVocab / kParts, (k + 1) * kVocab / kParts, left_out);
        std::copy(s.begin(), s.end(), partials.begin() + (k * kRows + r) * kHeadPartialCount);
      }
      whole.push_back(summarise(values, scores, 0, kVocab, left_out));
    }
    std::vector<float> out(kRows * kHeadStatCount);
    combine_head_partials(kRows, kParts, partials.data(), kRows * kHeadPartialCount, kHeadPartialCount, out.data(),
                          kHeadStatCount);
    for (int64_t r = 0; r < kRows; ++r) {
      const float* o = out.data() + r * kHeadStatCount;
      const std::vector<float>& w = whole[r];
      for (int col : {kHeadChosen, kHeadChosenLogit, kHeadMax, kHeadArgmax, kHeadSecond, kHeadSecondId})
        EXPECT_EQ(o[col], w[col]) << "trial " << trial << " row " << r << " column " << col;
      EXPECT_NEAR(o[kHeadLogSumExp], w[kHeadLogSumExp], 1e-5) << "trial " << trial;
      EXPECT_NEAR(o[kHeadMeanLogit], w[kHeadMeanLogit], 1e-5) << "trial " << trial;
    }
  }
}

TEST(HeadStatsCombine, APartWithEveryIdLeftOutCountsForNothing) {
  // Part 0 holds only banned ids: no chosen token, no statistics.
  std::vector<float> partials(2 * kHeadPartialCount);
  float* none = partials.data();
  none[kHeadChosen] = -1, none[kHeadChosenScore] = static_cast<float>(kNegInf);
  none[kHeadMax] = static_cast<float>(kNegInf), none[kHeadArgmax] = -1;
  none[kHeadLogSumExp] = static_cast<float>(kNegInf), none[kHeadMeanLogit] = std::nanf("");
  none[kHeadSecond] = static_cast<float>(kNegInf), none[kHeadSecondId] = -1;
  float* some = partials.data() + kHeadPartialCount;
  some[kHeadChosen] = 5, some[kHeadChosenLogit] = 1.5f, some[kHeadChosenScore] = 2;
  some[kHeadMax] = 1.5f, some[kHeadArgmax] = 5, some[kHeadLogSumExp] = 2, some[kHeadMeanLogit] = 1;
  some[kHeadSecond] = 0.5f, some[kHeadSecondId] = 6;
  std::vector<float> out(kHeadStatCount);
  combine_head_partials(1, 2, partials.data(), kHeadPartialCount, kHeadPartialCount, out.data(), kHeadStatCount);
  EXPECT_EQ(out[kHeadChosen], 5);
  EXPECT_EQ(out[kHeadArgmax], 5);
  EXPECT_FLOAT_EQ(out[kHeadLogSumExp], 2);
  EXPECT_FLOAT_EQ(out[kHeadMeanLogit], 1);
  EXPECT_EQ(out[kHeadSecondId], 6);
}

}  // namespace
}  // namespace mosaic
