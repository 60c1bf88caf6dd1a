// GPU tests of the fused gate / up / SwiGLU kernel (gate_up_swiglu.h) against what it replaces:
// cuBLASLt's gate and up products (gemm.h) and the SwiGLU kernel (elementwise.h), bit for bit, for
// row counts that are and are not multiples of the kernel's 128-row tiles (and of its pairs of
// them), strided rows, LLaDA-8B's and Dream-7B's k and f; row chunks against the whole product;
// the output's stride gap and the rows past m untouched. The separate path is checked against the
// CPU by gemm_test.cc and elementwise_test.cc. Skips without a compute capability 9.0 device.
#include "backend/cuda/gate_up_swiglu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/test_device_buffer.h"
#include "backend/cuda/test_random_bf16.h"
#include "core/half.h"

namespace mosaic::cuda {
namespace {

using testing_support::DeviceBuffer;
using testing_support::download;
using testing_support::random_bf16;

struct Case {
  int64_t m, k, f;
  int64_t x_pad = 0, weight_pad = 0, out_pad = 0;  // row stride = width + pad
};

class GateUpSwiglu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped";
    if (!gate_up_swiglu_available()) GTEST_SKIP() << "not a compute capability 9.0 device: the kernel is Hopper's";
  }

  // The fused kernel's output and the separate path's, both [m, out_stride] with a poisoned gap
  // and `extra_rows` poisoned rows after m.
  struct Outputs {
    std::vector<uint16_t> fused, separate;
  };
  static Outputs run_both(const Case& c, uint32_t seed, int64_t chunk_rows = 0) {
    const int64_t x_stride = c.k + c.x_pad, w_stride = c.k + c.weight_pad, out_stride = c.f + c.out_pad;
    constexpr int64_t kExtraRows = 3;
    // Inputs scaled so that the products are O(1): SiLU's curve, not only its tails.
    const float x_scale = 1.0f, w_scale = 3.0f / static_cast<float>(c.k);
    DeviceBuffer x(random_bf16(static_cast<size_t>(c.m * x_stride), seed, x_scale));
    DeviceBuffer gate(random_bf16(static_cast<size_t>(c.f * w_stride), seed + 1, w_scale * 40));
    DeviceBuffer up(random_bf16(static_cast<size_t>(c.f * w_stride), seed + 2, w_scale * 40));
    const size_t out_count = static_cast<size_t>((c.m + kExtraRows) * out_stride);
    DeviceBuffer fused(out_count * 2), separate(out_count * 2), up_out(out_count * 2);
    MOSAIC_CUDA_CHECK(cudaMemset(fused.data, 0xff, out_count * 2));
    MOSAIC_CUDA_CHECK(cudaMemset(separate.data, 0xff, out_count * 2));

    const int64_t step = chunk_rows > 0 ? chunk_rows : std::max<int64_t>(c.m, 1);
    for (int64_t first = 0; first == 0 || first < c.m; first += step) {  // one call when m is 0
      const int64_t rows = std::min(step, c.m - first);
      GateUpSwigluArgs args;
      args.m = rows, args.k = c.k, args.f = c.f;
      args.x = x.as<uint16_t>() + first * x_stride, args.x_stride = x_stride;
      args.gate = gate.data, args.up = up.data, args.weight_stride = w_stride;
      args.out = fused.as<uint16_t>() + first * out_stride, args.out_stride = out_stride;
      EXPECT_TRUE(gate_up_swiglu_shape_fits(args));
      gate_up_swiglu(args, nullptr);
    }

    Gemm gemm;
    GemmArgs products;
    products.m = c.m, products.n = c.f, products.k = c.k;
    products.a = x.data, products.lda = x_stride;
    products.b = gate.data, products.ldb = w_stride;
    products.c = separate.data, products.ldc = out_stride;
    if (c.m > 0) gemm.run(products, nullptr);
    products.b = up.data, products.c = up_out.data;
    if (c.m > 0) gemm.run(products, nullptr);
    if (c.m > 0) swiglu(c.m, c.f, separate.data, out_stride, up_out.data, out_stride, nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    return {download<uint16_t>(fused, out_count), download<uint16_t>(separate, out_count)};
  }

  static void expect_same_bits(const Case& c, uint32_t seed, int64_t chunk_rows = 0) {
    const Outputs got = run_both(c, seed, chunk_rows);
    const int64_t out_stride = c.f + c.out_pad;
    int64_t differ = 0, gap_written = 0, past_written = 0, nonzero = 0;
    for (size_t i = 0; i < got.fused.size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) / out_stride, col = static_cast<int64_t>(i) % out_stride;
      if (row >= c.m) {
        past_written += got.fused[i] != 0xffff;
      } else if (col >= c.f) {
        gap_written += got.fused[i] != 0xffff;
      } else {
        differ += got.fused[i] != got.separate[i];
        nonzero += (got.fused[i] & 0x7fff) != 0;
      }
    }
    const std::string shape = "m " + std::to_string(c.m) + ", k " + std::to_string(c.k) + ", f " +
                              std::to_string(c.f) + (chunk_rows ? ", chunks of " + std::to_string(chunk_rows) : "");
    EXPECT_EQ(differ, 0) << shape << ": outputs that differ from cuBLASLt gate, up + the SwiGLU kernel";
    EXPECT_EQ(gap_written, 0) << shape << ": writes into the output's stride gap";
    EXPECT_EQ(past_written, 0) << shape << ": writes past row m";
    if (c.m > 0) {
      EXPECT_GT(nonzero, c.m * c.f / 2) << shape << ": most outputs should be nonzero";
    }
  }
};

TEST_F(GateUpSwiglu, EqualsTheSeparateProductsAndSwigluBitForBit) {
  // Rows: one, fewer than a tile, one tile, an odd number of tiles (a pair's second tile past m),
  // ragged pairs; strides with gaps.
  expect_same_bits({.m = 1, .k = 256, .f = 256}, 1);
  expect_same_bits({.m = 77, .k = 192, .f = 384, .x_pad = 8, .weight_pad = 16, .out_pad = 24}, 2);
  expect_same_bits({.m = 128, .k = 64, .f = 128}, 3);
  expect_same_bits({.m = 384, .k = 512, .f = 640, .out_pad = 8}, 4);
  expect_same_bits({.m = 1000, .k = 1024, .f = 1024, .x_pad = 64}, 5);
  expect_same_bits({.m = 4133, .k = 256, .f = 512}, 6);  // more tiles than the device holds CTAs
}

TEST_F(GateUpSwiglu, RealModelShapes) {
  expect_same_bits({.m = 300, .k = 4096, .f = 12288}, 7);  // LLaDA-8B
  expect_same_bits({.m = 257, .k = 3584, .f = 18944}, 8);  // Dream-7B
}

TEST_F(GateUpSwiglu, RowChunksEqualTheWholeProduct) {
  // Chunks of 100 rows (not a tile multiple) against one call: compared with the same separate
  // path, so both must hold its bits.
  expect_same_bits({.m = 700, .k = 512, .f = 256}, 9, 100);
}

TEST_F(GateUpSwiglu, NoRowsWritesNothing) {
  expect_same_bits({.m = 0, .k = 128, .f = 128}, 10);
}

TEST(GateUpSwigluShape, RejectsWhatTheKernelCannotTake) {
  alignas(16) static uint16_t buffer[64];
  GateUpSwigluArgs ok;
  ok.m = 10, ok.k = 128, ok.f = 256;
  ok.x = buffer, ok.x_stride = 128, ok.gate = buffer, ok.up = buffer, ok.weight_stride = 128;
  ok.out = buffer, ok.out_stride = 256;
  EXPECT_TRUE(gate_up_swiglu_shape_fits(ok));
  auto fits_with = [&](auto change) {
    GateUpSwigluArgs a = ok;
    change(a);
    return gate_up_swiglu_shape_fits(a);
  };
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.k = 100; }));              // k % 64
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.f = 200; }));              // f % 128
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.x_stride = 100; }));       // stride < k
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.x_stride = 132; }));       // stride % 8
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.out_stride = 250; }));     // stride < f
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.weight_stride = 129; }));  // stride % 8
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.out = buffer + 1; }));     // alignment
  EXPECT_FALSE(fits_with([](GateUpSwigluArgs& a) { a.m = -1; }));
}

}  // namespace
}  // namespace mosaic::cuda
