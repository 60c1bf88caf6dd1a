#include "gen/host_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/lm_head.h"
#include "gen/confidence.h"

namespace mosaic {
namespace {

// Without a filter, the host sampler and the fused CPU head give the same statistics for the
// same logits (the head computes the logits with an identity matrix here).
TEST(HostSampler, AgreesWithTheFusedHead) {
  const int64_t vocab = 300, hidden = 300;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> h(hidden), w(vocab * hidden, 0.0f);
  for (float& x : h) x = normal(rng);
  for (int64_t v = 0; v < vocab; ++v) w[v * hidden + v] = 1.0f;  // logits = h
  for (const double inv_t : {0.0, 1.0, 2.5}) {
    HeadRowSampling how;
    how.seed = 77, how.step = 3, how.position = 11;
    how.choice_inv_temperature = inv_t;
    how.stats_scale = inv_t > 0 ? inv_t : 1.0;
    how.choice_bans[0] = 5;
    how.stats_bans[0] = 9, how.stats_bans[1] = 5;
    float fused[kHeadStatCount], host[kHeadStatCount];
    cpu::lm_head_sample(1, hidden, h.data(), hidden, w.data(), DType::f32, vocab, &how, fused, kHeadStatCount);
    sample_logits_row(h, how, {}, host);
    EXPECT_EQ(fused[kHeadChosen], host[kHeadChosen]);
    EXPECT_EQ(fused[kHeadArgmax], host[kHeadArgmax]);
    EXPECT_EQ(fused[kHeadSecondId], host[kHeadSecondId]);
    for (int c : {kHeadChosenLogit, kHeadMax, kHeadLogSumExp, kHeadMeanLogit, kHeadSecond})
      EXPECT_NEAR(fused[c], host[c], 1e-5) << "column " << c << " inv_t " << inv_t;
  }
}

TEST(HostSampler, TopPKeepsTheSmallestPrefixAboveP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: with p = 0.7 the reference keeps the first two
  // (0.5 < 0.7, 0.8 > 0.7 drops the third onward after the shift).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  float out[kHeadStatCount];
  sample_logits_row(logits, HeadRowSampling{}, {.top_p = 0.7}, out);
  EXPECT_EQ(out[kHeadChosen], 1.0f);
  EXPECT_EQ(out[kHeadSecondId], 3.0f);
  EXPECT_NEAR(std::exp(out[kHeadMax] - out[kHeadLogSumExp]), 0.5 / 0.8, 1e-6);
  // Temperature-style sampling only ever picks kept ids.
  for (uint32_t step = 0; step < 200; ++step) {
    HeadRowSampling how;
    how.choice_inv_temperature = 1.0, how.step = step;
    sample_logits_row(logits, how, {.top_p = 0.7}, out);
    EXPECT_TRUE(out[kHeadChosen] == 1.0f || out[kHeadChosen] == 3.0f);
  }
}

TEST(HostSampler, TopKAndConfidenceKinds) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.0f, 1.0f};
  float out[kHeadStatCount];
  sample_logits_row(logits, HeadRowSampling{}, {.top_k = 2}, out);
  const double z = std::exp(3.0) + std::exp(2.0);
  const HeadRowSampling how;
  EXPECT_NEAR(choice_from_head(out, how, ConfidenceKind::chosen_probability).confidence, std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(choice_from_head(out, how, ConfidenceKind::top2_margin).confidence,
              (std::exp(3.0) - std::exp(2.0)) / z, 1e-6);
  const double p1 = std::exp(3.0) / z, p2 = std::exp(2.0) / z;
  EXPECT_NEAR(choice_from_head(out, how, ConfidenceKind::negative_entropy).confidence,
              p1 * std::log(p1) + p2 * std::log(p2), 1e-6);
  EXPECT_EQ(choice_from_head(out, how, ConfidenceKind::chosen_probability).token, 1);
}

}  // namespace
}  // namespace mosaic
