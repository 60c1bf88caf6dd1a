// GPU tests of the small-rows product (small_rows_gemm.h): against a double-precision reference on
// the bf16 inputs for every strip, row count class and epilogue (plain, + bias, += C), rows past m
// and the stride gap of C untouched; and, through the Gemm at model shapes, rows computed a few at
// a time equal the rows of one 4096-row product bit for bit, with the small-rows kernel shown to
// compute the reference's bits on a Hopper device. Skips itself without a device; the kernel tests
// also skip on a device that does not run it (compute capability other than 9.0).
#include "backend/cuda/small_rows_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/test_random_bf16.h"
#include "core/half.h"

namespace mosaic::cuda {
namespace {

using testing_support::random_bf16;

struct DeviceBytes {
  explicit DeviceBytes(size_t bytes) : size(bytes) { MOSAIC_CUDA_CHECK(cudaMalloc(&data, bytes)); }
  ~DeviceBytes() { cudaFree(data); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void upload(const std::vector<uint16_t>& host) {
    MOSAIC_CUDA_CHECK(cudaMemcpy(data, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  }
  std::vector<uint16_t> download() const {
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> host(size / 2);
    MOSAIC_CUDA_CHECK(cudaMemcpy(host.data(), data, size, cudaMemcpyDeviceToHost));
    return host;
  }
  void* data = nullptr;
  size_t size = 0;
};

class SmallRowsGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  }
};

enum class Epilogue { plain, bias, accumulate };

// C [m x ldc] starts as `start` (NaN in the gap and in rows past m); the kernel's result against
// the double reference of the bf16 inputs, with the roundings the epilogue names.
void expect_kernel_matches_reference(int64_t m, int64_t n, int64_t k, int strip, Epilogue epilogue, uint32_t seed) {
  SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " strip=" + std::to_string(strip) + " epilogue=" + std::to_string(static_cast<int>(epilogue)));
  const int64_t lda = k + 8, ldb = k + 16, ldc = n + 6, rows_allocated = m + 3;
  const std::vector<uint16_t> a = random_bf16(rows_allocated * lda, seed);
  const std::vector<uint16_t> b = random_bf16(n * ldb, seed + 1);
  const std::vector<uint16_t> bias = random_bf16(n, seed + 2);
  std::vector<uint16_t> start(rows_allocated * ldc, 0xffff);
  std::mt19937 rng(seed + 3);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) start[i * ldc + j] = epilogue == Epilogue::accumulate ? f32_to_bf16(dist(rng)) : 0xffff;
  DeviceBytes a_dev(a.size() * 2), b_dev(b.size() * 2), bias_dev(bias.size() * 2), c_dev(start.size() * 2);
  a_dev.upload(a), b_dev.upload(b), bias_dev.upload(bias), c_dev.upload(start);

  GemmArgs args;
  args.m = m, args.n = n, args.k = k;
  args.a = a_dev.data, args.lda = lda, args.b = b_dev.data, args.ldb = ldb, args.c = c_dev.data, args.ldc = ldc;
  args.bias = epilogue == Epilogue::bias ? bias_dev.data : nullptr;
  args.accumulate = epilogue == Epilogue::accumulate;
  ASSERT_TRUE(small_rows_gemm_fits(args));
  small_rows_gemm(args, nullptr, strip);
  const std::vector<uint16_t> c = c_dev.download();

  double diff = 0, norm = 0;
  for (int64_t i = 0; i < rows_allocated; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const uint16_t got = c[i * ldc + j];
      if (i >= m || j >= n) {
        ASSERT_EQ(got, start[i * ldc + j]) << "a write outside the product at " << i << ", " << j;
        continue;
      }
      double want = 0;
      for (int64_t kk = 0; kk < k; ++kk) want += double(bf16_to_f32(a[i * lda + kk])) * bf16_to_f32(b[j * ldb + kk]);
      if (epilogue == Epilogue::bias) want += bf16_to_f32(bias[j]);
      if (epilogue == Epilogue::accumulate) want += bf16_to_f32(start[i * ldc + j]);
      const float value = bf16_to_f32(got);
      ASSERT_TRUE(std::isfinite(value)) << "C[" << i << ", " << j << "]";
      diff += (value - want) * (value - want), norm += want * want;
    }
  }
  EXPECT_LE(std::sqrt(diff / norm), 1e-2);  // bf16 output: one or two roundings to 8 bits
}

TEST_F(SmallRowsGemm, MatchesReferenceForEveryStripRowTileAndEpilogue) {
  if (!small_rows_gemm_available()) GTEST_SKIP() << "the device does not run the small-rows kernel";
  uint32_t seed = 1;
  // K of 5 tiles (one a stage) and of 8 (four or two a stage where the stages allow it).
  for (const int64_t k : {320, 512}) {
    for (const int strip : {16, 32, 64, 128}) {
      for (const int64_t m : {1, 7, 8, 33, 64, 65, 100, 128}) {
        for (const Epilogue epilogue : {Epilogue::plain, Epilogue::bias, Epilogue::accumulate}) {
          expect_kernel_matches_reference(m, 256, k, strip, epilogue, seed++);
        }
      }
    }
  }
}

TEST_F(SmallRowsGemm, RefusesShapesItCannotRun) {
  GemmArgs args;
  alignas(16) static uint16_t buffer[64];
  args.m = 8, args.n = 64, args.k = 64, args.a = buffer, args.lda = 64, args.b = buffer, args.ldb = 64;
  args.c = buffer, args.ldc = 64;
  EXPECT_TRUE(small_rows_gemm_fits(args));
  GemmArgs wrong = args;
  wrong.m = kSmallRowsMaxRows + 1;
  EXPECT_FALSE(small_rows_gemm_fits(wrong));
  wrong = args, wrong.k = 100;  // not a multiple of 64
  EXPECT_FALSE(small_rows_gemm_fits(wrong));
  wrong = args, wrong.n = 40;   // not a multiple of 16
  EXPECT_FALSE(small_rows_gemm_fits(wrong));
  wrong = args, wrong.c_dtype = DType::f32;
  EXPECT_FALSE(small_rows_gemm_fits(wrong));
  wrong = args, wrong.lda = 68;  // rows not 16-byte aligned
  EXPECT_FALSE(small_rows_gemm_fits(wrong));
}

TEST(SmallRowsGemmStrip, TakesTheWidestStripThatGivesEverySmOne) {
  EXPECT_EQ(small_rows_gemm_strip(12288, 132), 64);   // 192 strips
  EXPECT_EQ(small_rows_gemm_strip(18944, 132), 128);  // 148 strips
  EXPECT_EQ(small_rows_gemm_strip(4096, 132), 32);    // no strip of 32+ reaches 132: the narrowest of 32
  EXPECT_EQ(small_rows_gemm_strip(512, 132), 32);
  EXPECT_EQ(small_rows_gemm_strip(48, 132), 16);
}

// Through the Gemm: a 4096-row product (the reference algorithm), then the same rows a few at a
// time (the small-rows buckets), bit for bit; on a device that runs the kernel, the bucket choices
// record that it computed the reference's bits.
void expect_small_chunks_equal_reference(int64_t n, int64_t k, Epilogue epilogue) {
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " epilogue=" +
               std::to_string(static_cast<int>(epilogue)));
  constexpr int64_t kRows = kReferenceRows;
  const std::vector<uint16_t> a = random_bf16(kRows * k, 41), b = random_bf16(n * k, 42), bias = random_bf16(n, 43);
  std::vector<uint16_t> start(kRows * n, 0);
  if (epilogue == Epilogue::accumulate) start = random_bf16(kRows * n, 44);
  DeviceBytes a_dev(a.size() * 2), b_dev(b.size() * 2), bias_dev(bias.size() * 2), whole(start.size() * 2),
      chunked(start.size() * 2);
  a_dev.upload(a), b_dev.upload(b), bias_dev.upload(bias), whole.upload(start), chunked.upload(start);
  Gemm gemm;
  const auto args = [&](const DeviceBytes& c, int64_t begin, int64_t end) {
    GemmArgs g;
    g.m = end - begin, g.n = n, g.k = k;
    g.a = static_cast<const uint16_t*>(a_dev.data) + begin * k, g.lda = k, g.b = b_dev.data, g.ldb = k;
    g.c = static_cast<uint16_t*>(c.data) + begin * n, g.ldc = n;
    g.bias = epilogue == Epilogue::bias ? bias_dev.data : nullptr;
    g.accumulate = epilogue == Epilogue::accumulate;
    return g;
  };
  gemm.run(args(whole, 0, kRows), nullptr);
  // Chunks of 1 to 128 rows, both row-tile counts, then one long chunk for the rest.
  int64_t row = 0;
  for (const int64_t rows : {1, 32, 64, 5, 100, 128, 17, 77}) gemm.run(args(chunked, row, row + rows), nullptr), row += rows;
  gemm.run(args(chunked, row, kRows), nullptr);
  const std::vector<uint16_t> expected = whole.download(), got = chunked.download();
  for (int64_t i = 0; i < kRows; ++i) {
    ASSERT_EQ(std::memcmp(&expected[i * n], &got[i * n], n * 2), 0) << "row " << i << " differs";
  }
  if (!small_rows_gemm_available()) return;
  int checked = 0;
  for (const GemmBucketChoice& choice : gemm.bucket_choices()) {
    if (!choice.small_rows_kernel) continue;
    EXPECT_TRUE(choice.same_bits) << "rows up to " << choice.bucket << ": the small-rows kernel computed other bits";
    ++checked;
  }
  EXPECT_EQ(checked, 2) << "both small-rows buckets (64 and 128 rows) decided";
}

TEST_F(SmallRowsGemm, FewRowsAtATimeEqualTheReferenceAtModelShapes) {
  expect_small_chunks_equal_reference(4096, 4096, Epilogue::plain);        // LLaDA q / k / v
  expect_small_chunks_equal_reference(4096, 4096, Epilogue::accumulate);   // o with the residual add
  expect_small_chunks_equal_reference(12288, 4096, Epilogue::plain);       // gate / up
  expect_small_chunks_equal_reference(4096, 12288, Epilogue::accumulate);  // down with the residual add
  expect_small_chunks_equal_reference(512, 3584, Epilogue::bias);          // Dream's k / v
}

}  // namespace
}  // namespace mosaic::cuda
