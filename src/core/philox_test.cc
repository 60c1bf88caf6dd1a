#include "core/philox.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mosaic {
namespace {

// Known-answer vectors published with Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, KnownAnswerZero) {
  const PhiloxCounter out = philox4x32_10({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(out, (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerOnes) {
  const PhiloxCounter out =
      philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(out, (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPi) {
  const PhiloxCounter out = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                                          {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(out, (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UniformRangeAndMoments) {
  double sum = 0, sum_sq = 0, normal_sum = 0, normal_sq = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const PhiloxCounter w = philox4x32_10({static_cast<uint32_t>(i), 7, 0, 0}, philox_key(42));
    const float u = uniform_f32(w[0]);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    const double d = uniform_f64(w[1], w[2]);
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    sum += u;
    sum_sq += double(u) * u;
    const float z = normal_f32(w[2], w[3]);
    ASSERT_TRUE(std::isfinite(z));
    normal_sum += z;
    normal_sq += double(z) * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.005);
  EXPECT_NEAR(normal_sum / n, 0.0, 0.02);
  EXPECT_NEAR(normal_sq / n, 1.0, 0.03);
}

}  // namespace
}  // namespace mosaic
