#include "backend/cpu/norm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace mosaic::cpu {
namespace {

std::vector<float> random_floats(int64_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(count);
  for (float& x : values) x = dist(rng);
  return values;
}

TEST(RmsNorm, KnownValues) {
  const std::vector<float> x = {1, 2, 3, 4}, weight = {1, 1, 1, 2};
  std::vector<float> out(4);
  rms_norm(1, 4, x.data(), 4, weight.data(), 0.0f, out.data(), 4);
  const double inv_rms = 1.0 / std::sqrt(7.5);  // mean(1, 4, 9, 16) = 7.5
  EXPECT_FLOAT_EQ(out[0], 1 * inv_rms);
  EXPECT_FLOAT_EQ(out[1], 2 * inv_rms);
  EXPECT_FLOAT_EQ(out[2], 3 * inv_rms);
  EXPECT_FLOAT_EQ(out[3], 8 * inv_rms);
}

TEST(RmsNorm, ZeroRowStaysZero) {
  const std::vector<float> x(16, 0.0f), weight(16, 3.0f);
  std::vector<float> out(16, 1.0f);
  rms_norm(1, 16, x.data(), 16, weight.data(), 1e-6f, out.data(), 16);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(RmsNorm, MatchesDoubleReference) {
  for (int64_t dim : {1, 3, 8, 13, 100, 4096}) {
    for (float eps : {1e-5f, 1e-6f}) {
      const int64_t rows = 5, x_stride = dim + 3, out_stride = dim + 1;
      const std::vector<float> x = random_floats(rows * x_stride, 10 + dim, 4.0f);
      const std::vector<float> weight = random_floats(dim, 20 + dim, 2.0f);
      std::vector<float> out(rows * out_stride, -9.0f);
      rms_norm(rows, dim, x.data(), x_stride, weight.data(), eps, out.data(), out_stride);
      for (int64_t t = 0; t < rows; ++t) {
        double sum = 0;
        for (int64_t i = 0; i < dim; ++i) sum += double(x[t * x_stride + i]) * x[t * x_stride + i];
        const double inv_rms = 1.0 / std::sqrt(sum / dim + eps);
        for (int64_t i = 0; i < dim; ++i) {
          const double expected = x[t * x_stride + i] * inv_rms * weight[i];
          ASSERT_NEAR(out[t * out_stride + i], expected, 1e-6 * std::abs(expected) + 1e-30)
              << "dim=" << dim << " t=" << t << " i=" << i;
        }
        EXPECT_EQ(out[t * out_stride + dim], -9.0f);  // the stride gap is untouched
      }
    }
  }
}

TEST(RmsNorm, InPlaceAndThreadCountGiveSameBits) {
  const int64_t rows = 64, dim = 1001;
  const std::vector<float> x = random_floats(rows * dim, 30), weight = random_floats(dim, 31);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<float> one(rows * dim);
  rms_norm(rows, dim, x.data(), dim, weight.data(), 1e-5f, one.data(), dim);
  omp_set_num_threads(2);
  std::vector<float> in_place = x;
  rms_norm(rows, dim, in_place.data(), dim, weight.data(), 1e-5f, in_place.data(), dim);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.data(), in_place.data(), one.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace mosaic::cpu
