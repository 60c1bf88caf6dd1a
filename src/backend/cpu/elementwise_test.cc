#include "backend/cpu/elementwise.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"

namespace mosaic::cpu {
namespace {

std::vector<float> random_floats(int64_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(count);
  for (float& x : values) x = dist(rng);
  return values;
}

// Every 16-bit pattern, repeated past the 64 Ki-element chunk of convert_to_f32, converts to the
// same bits as the scalar core/half.h routine (NaNs only need to stay NaN: F16C quiets them).
TEST(ConvertToF32, EveryHalfPatternMatchesScalarConversion) {
  const int64_t count = 3 * 65536 + 11;
  std::vector<uint16_t> patterns(count);
  for (int64_t i = 0; i < count; ++i) patterns[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> out(count);
  for (DType dtype : {DType::bf16, DType::f16}) {
    convert_to_f32(count, patterns.data(), dtype, out.data());
    for (int64_t i = 0; i < count; ++i) {
      const float expected =
          dtype == DType::bf16 ? bf16_to_f32(patterns[i]) : f16_to_f32(patterns[i]);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(out[i])) << dtype_name(dtype) << " 0x" << std::hex << patterns[i];
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(expected))
            << dtype_name(dtype) << " 0x" << std::hex << patterns[i];
      }
    }
  }
  const std::vector<float> f32 = random_floats(1000, 1);
  std::vector<float> copy(1000);
  convert_to_f32(1000, f32.data(), DType::f32, copy.data());
  EXPECT_EQ(copy, f32);
}

TEST(EmbeddingGather, ReadsTheNamedRowsInEveryDtype) {
  const int64_t rows = 10, dim = 19, out_stride = 24;
  const std::vector<float> table = random_floats(rows * dim, 2, 3.0f);
  std::vector<uint16_t> table_bf16(table.size()), table_f16(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    table_bf16[i] = f32_to_bf16(table[i]);
    table_f16[i] = f32_to_f16(table[i]);
  }
  const std::vector<int32_t> ids = {3, 0, 9, 3, 7};
  const int64_t tokens = static_cast<int64_t>(ids.size());

  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const void* data = dtype == DType::f32    ? static_cast<const void*>(table.data())
                       : dtype == DType::bf16 ? static_cast<const void*>(table_bf16.data())
                                              : static_cast<const void*>(table_f16.data());
    std::vector<float> out(tokens * out_stride, -1.0f);
    embedding_gather(tokens, dim, ids.data(), data, dtype, out.data(), out_stride);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < dim; ++i) {
        const int64_t at = ids[t] * dim + i;
        const float expected = dtype == DType::f32    ? table[at]
                               : dtype == DType::bf16 ? bf16_to_f32(table_bf16[at])
                                                      : f16_to_f32(table_f16[at]);
        ASSERT_EQ(out[t * out_stride + i], expected) << dtype_name(dtype) << " t=" << t;
      }
      for (int64_t i = dim; i < out_stride; ++i) ASSERT_EQ(out[t * out_stride + i], -1.0f);
    }
  }
}

TEST(Swiglu, MatchesDoubleReference) {
  const int64_t rows = 7, dim = 33, gate_stride = 40, up_stride = 35;
  std::vector<float> gate = random_floats(rows * gate_stride, 3, 12.0f);
  const std::vector<float> up = random_floats(rows * up_stride, 4, 2.0f);
  const std::vector<float> original = gate;
  swiglu(rows, dim, gate.data(), gate_stride, up.data(), up_stride);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t f = 0; f < dim; ++f) {
      const double g = original[t * gate_stride + f], u = up[t * up_stride + f];
      const double expected = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(gate[t * gate_stride + f], expected, 1e-6 * std::abs(expected) + 1e-7);
    }
    for (int64_t f = dim; f < gate_stride; ++f) {
      ASSERT_EQ(gate[t * gate_stride + f], original[t * gate_stride + f]);
    }
  }
}

TEST(Swiglu, SaturatesWithoutNaN) {
  std::vector<float> gate = {-1000.0f, -90.0f, 0.0f, 90.0f, 1000.0f};
  const std::vector<float> up(5, 2.0f);
  swiglu(1, 5, gate.data(), 5, up.data(), 5);
  EXPECT_EQ(gate[0], 0.0f);
  EXPECT_EQ(gate[1], 0.0f);
  EXPECT_EQ(gate[2], 0.0f);
  EXPECT_EQ(gate[3], 180.0f);
  EXPECT_EQ(gate[4], 2000.0f);
}

TEST(AddInplace, AddsRowsWithStrides) {
  const int64_t rows = 4, dim = 9, x_stride = 12, y_stride = 10;
  std::vector<float> x = random_floats(rows * x_stride, 5);
  const std::vector<float> y = random_floats(rows * y_stride, 6), original = x;
  add_inplace(rows, dim, x.data(), x_stride, y.data(), y_stride);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < x_stride; ++i) {
      const float expected =
          i < dim ? original[t * x_stride + i] + y[t * y_stride + i] : original[t * x_stride + i];
      ASSERT_EQ(x[t * x_stride + i], expected);
    }
  }
}

}  // namespace
}  // namespace mosaic::cpu
