#include "backend/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace mosaic::cpu {
namespace {

TEST(RopeInvFreq, MatchesTheFormula) {
  for (double theta : {10000.0, 500000.0, 1000000.0}) {
    const std::vector<float> inv_freq = rope_inv_freq(128, theta);
    ASSERT_EQ(inv_freq.size(), 64u);
    EXPECT_EQ(inv_freq[0], 1.0f);
    for (int64_t j = 0; j < 64; ++j) {
      const double expected = 1.0 / std::pow(theta, 2.0 * j / 128.0);
      EXPECT_NEAR(inv_freq[j], expected, 1e-5 * expected) << "theta=" << theta << " j=" << j;
    }
  }
  // head_dim 4, theta 10^4: [1, 10^-2]
  const std::vector<float> small = rope_inv_freq(4, 10000.0);
  EXPECT_EQ(small[0], 1.0f);
  EXPECT_FLOAT_EQ(small[1], 0.01f);
}

TEST(RopeApply, KnownTinyCase) {
  // One token at position 1, one head of dim 4: angles (1, 0.01).
  std::vector<float> x = {1, 2, 3, 4};
  const int32_t position = 1;
  const std::vector<float> inv_freq = rope_inv_freq(4, 10000.0);
  rope_apply(1, 1, 4, x.data(), 4, &position, inv_freq.data());
  const double a = 1.0, b = double(inv_freq[1]);
  EXPECT_NEAR(x[0], 1 * std::cos(a) - 3 * std::sin(a), 1e-6);
  EXPECT_NEAR(x[1], 2 * std::cos(b) - 4 * std::sin(b), 1e-6);
  EXPECT_NEAR(x[2], 3 * std::cos(a) + 1 * std::sin(a), 1e-6);
  EXPECT_NEAR(x[3], 4 * std::cos(b) + 2 * std::sin(b), 1e-6);
}

TEST(RopeApply, PositionZeroIsIdentity) {
  std::vector<float> x = {0.5f, -1.25f, 3.0f, 7.0f, 1e-3f, -2.0f};
  const std::vector<float> original = x;
  const int32_t position = 0;
  const std::vector<float> inv_freq = rope_inv_freq(6, 10000.0);
  rope_apply(1, 1, 6, x.data(), 6, &position, inv_freq.data());
  EXPECT_EQ(std::memcmp(x.data(), original.data(), x.size() * sizeof(float)), 0);
}

TEST(RopeApply, MatchesDoubleReference) {
  const int64_t tokens = 37, heads = 3, head_dim = 64, stride = heads * head_dim + 5;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(tokens * stride);
  for (float& v : x) v = dist(rng);
  std::vector<int32_t> positions(tokens);
  for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 32768);
  positions[0] = 0;

  const std::vector<float> inv_freq = rope_inv_freq(head_dim, 500000.0);
  std::vector<float> y = x;
  rope_apply(tokens, heads, head_dim, y.data(), stride, positions.data(), inv_freq.data());

  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = &x[t * stride + h * head_dim];
      const float* out = &y[t * stride + h * head_dim];
      for (int64_t j = 0; j < half; ++j) {
        // The angle is defined in fp32 (rope.h); everything after it in double.
        const double angle = static_cast<float>(positions[t]) * inv_freq[j];
        const double c = std::cos(angle), s = std::sin(angle);
        ASSERT_NEAR(out[j], in[j] * c - in[j + half] * s, 1e-6) << t << " " << h << " " << j;
        ASSERT_NEAR(out[j + half], in[j + half] * c + in[j] * s, 1e-6) << t << " " << h << " " << j;
      }
    }
    for (int64_t pad = heads * head_dim; pad < stride; ++pad) {
      ASSERT_EQ(y[t * stride + pad], x[t * stride + pad]);  // the stride gap is untouched
    }
  }
}

}  // namespace
}  // namespace mosaic::cpu
