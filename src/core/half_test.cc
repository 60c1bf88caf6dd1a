#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mosaic {
namespace {

// Reference values from IEEE 754 tables (independent of the bit tricks under test).
TEST(Half, Bf16KnownValues) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(3.140625f), 0x4049);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is halfway too: ties to even rounds up to 1 + 2^-6... i.e. mantissa 0x02.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(Half, F16KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // overflows to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);  // below half the smallest subnormal
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

// Every fp16 bit pattern survives f16 -> f32 -> f16 (NaNs stay NaN).
TEST(Half, F16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float widened = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(widened)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(widened))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(widened), bits) << "pattern " << bits;
  }
}

TEST(Half, Bf16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float widened = bf16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(widened)) continue;
    ASSERT_EQ(f32_to_bf16(widened), bits) << "pattern " << bits;
  }
}

// Narrowing picks the nearest representable value: compare with a brute-force search.
TEST(Half, F16NarrowingIsNearest) {
  for (float x = -70000.0f; x < 70000.0f; x += 37.123f) {
    const uint16_t got = f32_to_f16(x);
    const double err = std::fabs(double(f16_to_f32(got)) - x);
    for (int delta : {-1, 1}) {
      const uint16_t neighbour = static_cast<uint16_t>(got + delta);
      const float v = f16_to_f32(neighbour);
      if (std::isfinite(v) && std::isfinite(f16_to_f32(got))) {
        EXPECT_LE(err, std::fabs(double(v) - x) + 1e-12) << x;
      }
    }
  }
}

}  // namespace
}  // namespace mosaic
