#include "backend/cpu/lm_head.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/half.h"
#include "core/philox.h"

namespace mosaic::cpu {
namespace {

struct Problem {
  int64_t rows, hidden, vocab;
  std::vector<float> h;
  std::vector<uint16_t> w;  // bf16
  std::vector<float> logits;

  Problem(int64_t rows_, int64_t hidden_, int64_t vocab_, uint32_t seed)
      : rows(rows_), hidden(hidden_), vocab(vocab_), h(rows_ * hidden_), w(vocab_ * hidden_),
        logits(rows_ * vocab_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : h) x = normal(rng);
    for (uint16_t& x : w) x = f32_to_bf16(normal(rng) * 0.3f);
    GemmArgs args;
    args.m = rows, args.n = vocab, args.k = hidden, args.a = h.data(), args.lda = hidden;
    args.b = w.data(), args.b_dtype = DType::bf16, args.ldb = hidden, args.c = logits.data(), args.ldc = vocab;
    gemm_nt(args);
  }

  std::vector<float> sample(const HeadRowSampling* how) const {
    std::vector<float> out(rows * kLmHeadStats, std::nanf(""));
    lm_head_sample(rows, hidden, h.data(), hidden, w.data(), DType::bf16, vocab, how, out.data(), kLmHeadStats);
    return out;
  }
};

bool in(const int32_t (&bans)[2], int64_t v) { return bans[0] == v || bans[1] == v; }

// Reference: every statistic from the materialised logits, in long double, straight from the
// definitions in lm_head.h.
void expect_row(const Problem& p, int64_t r, const HeadRowSampling& how, const float* s) {
  const float* l = p.logits.data() + r * p.vocab;
  int64_t chosen = -1;
  long double best = -INFINITY;
  for (int64_t v = 0; v < p.vocab; ++v) {
    if (in(how.choice_bans, v)) continue;
    const long double score = how.choice_inv_temperature > 0
        ? (long double)l[v] * how.choice_inv_temperature +
              rng_gumbel(how.seed, RngStream::gumbel_token, uint32_t(v), how.position, how.step)
        : (long double)l[v];
    if (score > best) best = score, chosen = v;
  }
  int64_t top = -1, second = -1;
  for (int64_t v = 0; v < p.vocab; ++v) {
    if (in(how.stats_bans, v)) continue;
    if (top < 0 || l[v] > l[top]) second = top, top = v;
    else if (second < 0 || l[v] > l[second]) second = v;
  }
  const long double scale = how.stats_scale;
  long double z = 0, zs = 0;
  for (int64_t v = 0; v < p.vocab; ++v) {
    if (in(how.stats_bans, v)) continue;
    const long double e = std::exp(l[v] * scale - l[top] * scale);
    z += e;
    zs += e * l[v] * scale;
  }
  EXPECT_EQ(s[0], float(chosen)) << "row " << r;
  EXPECT_NEAR(s[1], double(l[chosen] * scale), 1e-6);
  EXPECT_NEAR(s[2], double(l[top] * scale), 1e-6);
  EXPECT_EQ(s[3], float(top));
  EXPECT_NEAR(s[4], double(l[top] * scale + std::log(z)), 1e-5);
  EXPECT_NEAR(s[5], double(zs / z), 1e-5);
  EXPECT_NEAR(s[6], double(l[second] * scale), 1e-6);
  EXPECT_EQ(s[7], float(second));
}

TEST(LmHeadSample, GreedyMatchesMaterialisedLogits) {
  const Problem p(131, 48, 5000, 7);  // 3 vocabulary tiles (ragged last), 2 row blocks
  const std::vector<float> out = p.sample(nullptr);
  for (int64_t r = 0; r < p.rows; ++r) {
    expect_row(p, r, HeadRowSampling{}, out.data() + r * kLmHeadStats);
    EXPECT_EQ(out[r * kLmHeadStats + 2], p.logits[r * p.vocab + int64_t(out[r * kLmHeadStats + 3])]);
  }
}

TEST(LmHeadSample, GumbelTemperatureScaleAndBans) {
  const Problem p(20, 32, 3000, 9);
  std::vector<HeadRowSampling> how(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) {
    how[r].seed = 1234567890123ull + r % 3;
    how[r].step = 5 + static_cast<uint32_t>(r);
    how[r].position = static_cast<uint32_t>(r * 7);
    how[r].choice_inv_temperature = r % 4 == 0 ? 0.0 : 1.0 / (0.3 + 0.2 * (r % 5));
    how[r].stats_scale = r % 2 ? 1.0 : 1.0 / 0.7;
    // Ban the greedy winner from the choice, and two others from the statistics.
    const float* l = p.logits.data() + r * p.vocab;
    how[r].choice_bans[0] = int32_t(std::max_element(l, l + p.vocab) - l);
    how[r].stats_bans[0] = 17, how[r].stats_bans[1] = int32_t(2048 + r);
  }
  const std::vector<float> out = p.sample(how.data());
  for (int64_t r = 0; r < p.rows; ++r) expect_row(p, r, how[r], out.data() + r * kLmHeadStats);
}

TEST(LmHeadSample, TiesGoToTheLowestId) {
  const int64_t hidden = 8, vocab = 4100;
  std::vector<float> h(hidden, 0.0f);
  h[0] = 1.0f;
  std::vector<float> w(vocab * hidden, 0.0f);
  for (int64_t v : {4099, 2050, 3}) w[v * hidden] = 2.0f;  // equal maxima in three tiles
  std::vector<float> out(kLmHeadStats);
  lm_head_sample(1, hidden, h.data(), hidden, w.data(), DType::f32, vocab, nullptr, out.data(), kLmHeadStats);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[3], 3.0f);
  EXPECT_EQ(out[6], 2.0f);
  EXPECT_EQ(out[7], 2050.0f);
}

TEST(LmHeadSample, RowChunkingIsBitExact) {
  const Problem p(40, 32, 3000, 3);
  std::vector<HeadRowSampling> how(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) how[r].choice_inv_temperature = 1.0, how[r].position = uint32_t(r);
  const std::vector<float> whole = p.sample(how.data());
  std::vector<float> parts(p.rows * kLmHeadStats);
  for (int64_t r = 0; r < p.rows; r += 7)
    lm_head_sample(std::min<int64_t>(7, p.rows - r), p.hidden, p.h.data() + r * p.hidden, p.hidden,
                   p.w.data(), DType::bf16, p.vocab, how.data() + r, parts.data() + r * kLmHeadStats,
                   kLmHeadStats);
  EXPECT_EQ(whole, parts);
}

}  // namespace
}  // namespace mosaic::cpu
