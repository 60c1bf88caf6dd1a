#include "backend/cpu/lm_head.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/half.h"

namespace mosaic::cpu {
namespace {

// Reference: materialise the logits with gemm_nt, then compute every statistic in long double.
TEST(LmHeadStats, MatchesMaterialisedLogits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 131, hidden = 48, vocab = 5000;  // 3 tiles, ragged last; 2 row blocks
  std::vector<float> h(rows * hidden);
  std::vector<uint16_t> w(vocab * hidden);
  for (float& x : h) x = normal(rng);
  for (uint16_t& x : w) x = f32_to_bf16(normal(rng) * 0.3f);
  w[17 * hidden + 0] = w[4000 * hidden + 0];  // no exact ties expected from random data anyway

  std::vector<float> logits(rows * vocab);
  GemmArgs args;
  args.m = rows, args.n = vocab, args.k = hidden, args.a = h.data(), args.lda = hidden;
  args.b = w.data(), args.b_dtype = DType::bf16, args.ldb = hidden, args.c = logits.data(), args.ldc = vocab;
  gemm_nt(args);

  std::vector<float> stats(rows * kLmHeadStats, std::nanf(""));
  lm_head_stats(rows, hidden, h.data(), hidden, w.data(), DType::bf16, vocab, stats.data(), kLmHeadStats);
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * vocab;
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v) if (l[v] > l[best]) best = v;
    int64_t second = best == 0 ? 1 : 0;
    for (int64_t v = 0; v < vocab; ++v) if (v != best && l[v] > l[second]) second = v;
    long double z = 0, pl = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp((long double)l[v] - l[best]);
    for (int64_t v = 0; v < vocab; ++v) pl += std::exp((long double)l[v] - l[best]) / z * l[v];
    const float* s = stats.data() + r * kLmHeadStats;
    EXPECT_EQ(s[0], l[best]);  // bit-exact: the same fp32 logits
    EXPECT_EQ(s[1], float(best));
    EXPECT_NEAR(s[2], double(l[best] + std::log(z)), 1e-5);
    EXPECT_NEAR(s[3], double(pl), 1e-5);
    EXPECT_EQ(s[4], l[second]);
    EXPECT_EQ(s[5], float(second));
  }
}

TEST(LmHeadStats, TiesGoToTheLowestId) {
  const int64_t hidden = 8, vocab = 4100;
  std::vector<float> h(hidden, 0.0f);
  h[0] = 1.0f;
  std::vector<float> w(vocab * hidden, 0.0f);
  for (int64_t v : {4099, 2050, 3}) w[v * hidden] = 2.0f;  // equal maxima in three tiles
  std::vector<float> stats(kLmHeadStats);
  lm_head_stats(1, hidden, h.data(), hidden, w.data(), DType::f32, vocab, stats.data(), kLmHeadStats);
  EXPECT_EQ(stats[1], 3.0f);
  EXPECT_EQ(stats[4], 2.0f);
  EXPECT_EQ(stats[5], 2050.0f);
}

TEST(LmHeadStats, RowChunkingIsBitExact) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 40, hidden = 32, vocab = 3000;
  std::vector<float> h(rows * hidden), w(vocab * hidden);
  for (float& x : h) x = normal(rng);
  for (float& x : w) x = normal(rng);
  std::vector<float> whole(rows * kLmHeadStats), parts(rows * kLmHeadStats);
  lm_head_stats(rows, hidden, h.data(), hidden, w.data(), DType::f32, vocab, whole.data(), kLmHeadStats);
  for (int64_t r = 0; r < rows; r += 7)
    lm_head_stats(std::min<int64_t>(7, rows - r), hidden, h.data() + r * hidden, hidden, w.data(),
                  DType::f32, vocab, parts.data() + r * kLmHeadStats, kLmHeadStats);
  EXPECT_EQ(whole, parts);
}

}  // namespace
}  // namespace mosaic::cpu
