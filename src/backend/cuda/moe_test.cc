// The CUDA MoE kernels against the CPU's (backend/cpu/moe.h, gemm.h) on the same bf16 values:
// routing picks the same experts with the same probabilities, the permutation is the CPU's
// exactly, the grouped product matches fp32 products per expert and gives a row the same bits
// whatever rows share its tiles, the combine matches. Skipped without a device.
#include "backend/cuda/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/moe.h"
#include "backend/cpu/moe_route_grouped.h"
#include "backend/cuda/moe_route_grouped.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/test_device_buffer.h"
#include "backend/cuda/test_random_bf16.h"
#include "core/half.h"

namespace mosaic::cuda {
namespace {

using testing_support::DeviceBuffer;
using testing_support::download;
using testing_support::random_bf16;

std::vector<float> widen(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_f32(bits[i]);
  return out;
}

class CudaMoe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaMoe, RouteChoosesTheCpusExperts) {
  for (const auto& [experts, k] : {std::pair<int64_t, int64_t>{64, 8}, {8, 2}, {256, 8}, {5, 5}, {40, 32}}) {
    const int64_t rows = 333, stride = experts + 3;
    const std::vector<uint16_t> logits = random_bf16(rows * stride, static_cast<uint32_t>(experts + k), 4.0f);
    DeviceBuffer device_logits(logits), device_experts(rows * k * 4), device_weights(rows * k * 4);
    moe_route(rows, experts, k, device_logits.data, stride, device_experts.as<int32_t>(), device_weights.as<float>(),
              nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got_experts = download<int32_t>(device_experts, rows * k);
    const auto got_weights = download<float>(device_weights, rows * k);
    std::vector<int32_t> want_experts(rows * k);
    std::vector<float> want_weights(rows * k);
    const std::vector<float> wide = widen(logits);
    cpu::moe_route(rows, experts, k, wide.data(), stride, want_experts.data(), want_weights.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(got_experts[r * k + j], want_experts[r * k + j]) << experts << "/" << k << " row " << r;
        EXPECT_NEAR(got_weights[r * k + j], want_weights[r * k + j], 1e-6 + 1e-5 * want_weights[r * k + j]);
      }
  }
}

// LLaDA 2.x's router: fp32 logits and bias, the CPU's choices and weights (sigmoid via expf on
// both sides may differ in an ulp; the random logits leave no ties that close).
TEST_F(CudaMoe, GroupedRouteChoosesTheCpusExperts) {
  struct Case { int64_t experts, k, groups, top_groups; };
  for (const Case c : {Case{256, 8, 8, 4}, Case{16, 4, 4, 2}, Case{64, 1, 8, 2}, Case{32, 32, 1, 1}, Case{96, 6, 32, 3}}) {
    const int64_t rows = 301, stride = c.experts + 5;
    std::mt19937 rng(static_cast<uint32_t>(c.experts * 7 + c.k));
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> logits(rows * stride), bias(c.experts);
    for (float& v : logits) v = dist(rng);
    for (float& v : bias) v = 0.1f * dist(rng);
    DeviceBuffer device_logits(logits.size() * 4), device_bias(bias.size() * 4);
    MOSAIC_CUDA_CHECK(cudaMemcpy(device_logits.data, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    MOSAIC_CUDA_CHECK(cudaMemcpy(device_bias.data, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
    DeviceBuffer device_experts(rows * c.k * 4), device_weights(rows * c.k * 4);
    GroupedRouteArgs args;
    args.rows = rows, args.experts = c.experts, args.k = c.k, args.groups = c.groups, args.top_groups = c.top_groups;
    args.scaling = 2.5f;
    args.logits = device_logits.as<float>(), args.logits_stride = stride, args.bias = device_bias.as<float>();
    args.route_experts = device_experts.as<int32_t>(), args.route_weights = device_weights.as<float>();
    moe_route_grouped(args, nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got_experts = download<int32_t>(device_experts, rows * c.k);
    const auto got_weights = download<float>(device_weights, rows * c.k);
    std::vector<int32_t> want_experts(rows * c.k);
    std::vector<float> want_weights(rows * c.k);
    cpu::moe_route_grouped(rows, {.experts = c.experts, .k = c.k, .groups = c.groups, .top_groups = c.top_groups,
                                  .scaling = 2.5f},
                           logits.data(), stride, bias.data(), want_experts.data(), want_weights.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < c.k; ++j) {
        ASSERT_EQ(got_experts[r * c.k + j], want_experts[r * c.k + j]) << c.experts << "/" << c.k << " row " << r;
        EXPECT_NEAR(got_weights[r * c.k + j], want_weights[r * c.k + j], 1e-6 + 1e-5 * want_weights[r * c.k + j]);
      }
  }
}

TEST_F(CudaMoe, PermutationIsTheCpus) {
  std::mt19937 rng(5);
  for (const auto& [rows, experts, k] : {std::tuple<int64_t, int64_t, int64_t>{3000, 64, 8}, {1, 8, 2}, {777, 256, 4}, {50, 3, 3}}) {
    std::vector<int32_t> route(rows * k);
    std::vector<int32_t> all(experts);
    std::iota(all.begin(), all.end(), 0);
    for (int64_t r = 0; r < rows; ++r) {
      std::shuffle(all.begin(), all.end(), rng);
      std::sort(all.begin(), all.begin() + k);
      std::copy_n(all.begin(), k, route.begin() + r * k);
    }
    DeviceBuffer device_route(route), device_rows((experts + 1 + rows * k) * 4), device_slots(rows * k * 4);
    moe_permute(rows, experts, k, device_route.as<int32_t>(), device_rows.as<int32_t>(), device_slots.as<int32_t>(),
                nullptr);
    MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int32_t> want_rows(experts + 1 + rows * k), want_slots(rows * k);
    cpu::moe_permute(rows, experts, k, route.data(), want_rows.data(), want_slots.data());
    EXPECT_EQ(download<int32_t>(device_rows, want_rows.size()), want_rows) << rows << " rows, " << experts << " experts";
    EXPECT_EQ(download<int32_t>(device_slots, want_slots.size()), want_slots);
  }
}

// Rows of several experts (one with none, runs of 1 to 150 rows), n and k not multiples of the
// tiles: within 1e-2 of fp32 products of the same bf16 values, and each row's bits unchanged when
// the rows of every expert run in the opposite order (other rows share its tiles).
TEST_F(CudaMoe, GroupedProductMatchesEachExpertsProduct) {
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{98, 72}, {128, 256}, {64, 8}, {512, 2048}, {136, 520}}) {
    const std::vector<int32_t> offsets = {0, 150, 150, 151, 230, 300};
    const int64_t experts = 5, rows = offsets.back(), lda = k + 8, ldc = n + 6;
    const std::vector<uint16_t> a = random_bf16(rows * lda, 1, 2.0f);
    std::vector<std::vector<uint16_t>> weights;
    std::vector<std::unique_ptr<DeviceBuffer>> device_weights;
    std::vector<const void*> pointers;
    for (int64_t e = 0; e < experts; ++e) {
      weights.push_back(random_bf16(n * k, static_cast<uint32_t>(10 + e), 0.2f));
      device_weights.push_back(std::make_unique<DeviceBuffer>(weights.back()));
      pointers.push_back(device_weights.back()->data);
    }
    DeviceBuffer device_pointers(pointers), device_offsets(offsets);
    auto run = [&](const std::vector<uint16_t>& input, ExpertGemmKernel kernel) {
      DeviceBuffer device_a(input), device_out(rows * ldc * 2);
      ExpertGemmArgs args;
      args.kernel = kernel;
      args.max_rows = rows + 37, args.n = n, args.k = k, args.experts = experts;
      args.a = device_a.data, args.lda = lda;
      args.weights = static_cast<const void* const*>(device_pointers.data);
      args.offsets = device_offsets.as<int32_t>();
      args.out = device_out.data, args.ldc = ldc;
      expert_gemm(args, nullptr);
      MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
      return download<uint16_t>(device_out, rows * ldc);
    };
    const std::vector<uint16_t> got = run(a, ExpertGemmKernel::tiles);
    // The few-rows kernel's tiles and pipeline differ; each output's sum does not: the same bits.
    const std::vector<uint16_t> few = run(a, ExpertGemmKernel::few_rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c)
        ASSERT_EQ(few[r * ldc + c], got[r * ldc + c]) << "few-rows kernel, row " << r << " column " << c;
    const std::vector<float> wide_a = widen(a);
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t m = offsets[e + 1] - offsets[e];
      if (m == 0) continue;
      const std::vector<float> wide_w = widen(weights[e]);
      std::vector<float> want(m * n);
      cpu::GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.a = wide_a.data() + offsets[e] * lda, g.lda = lda;
      g.b = wide_w.data(), g.b_dtype = DType::f32, g.ldb = k, g.c = want.data(), g.ldc = n;
      cpu::gemm_nt(g);
      double error = 0, norm = 0;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) {
          const double d = bf16_to_f32(got[(offsets[e] + r) * ldc + c]) - want[r * n + c];
          error += d * d, norm += double(want[r * n + c]) * want[r * n + c];
        }
      EXPECT_LE(std::sqrt(error / norm), 1e-2) << "n " << n << " k " << k << " expert " << e;
    }
    std::vector<uint16_t> reversed(a.size());
    auto mirror = [&](int64_t row) {  // the row's place with its expert's run reversed
      int64_t e = 0;
      while (offsets[e + 1] <= row) ++e;
      return offsets[e] + offsets[e + 1] - 1 - row;
    };
    for (int64_t r = 0; r < rows; ++r) std::copy_n(a.begin() + r * lda, lda, reversed.begin() + mirror(r) * lda);
    for (const ExpertGemmKernel kernel : {ExpertGemmKernel::tiles, ExpertGemmKernel::few_rows}) {
      const std::vector<uint16_t> flipped = run(reversed, kernel);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c)
          ASSERT_EQ(got[r * ldc + c], flipped[mirror(r) * ldc + c]) << "row " << r << " column " << c;
    }
  }
}

TEST_F(CudaMoe, CombineAddsTheWeightedOutputs) {
  const int64_t rows = 97, hidden = 136, k = 3;
  const std::vector<uint16_t> x = random_bf16(rows * hidden, 3), y = random_bf16(rows * k * hidden, 4);
  std::vector<float> weights(rows * k);
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  for (float& w : weights) w = dist(rng);
  std::vector<int32_t> slots(rows * k);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  DeviceBuffer device_x(x), device_y(y), device_weights(weights), device_slots(slots);
  moe_combine(rows, hidden, k, device_x.data, hidden, device_y.data, hidden, device_weights.as<float>(),
              device_slots.as<int32_t>(), nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = download<uint16_t>(device_x, rows * hidden);
  std::vector<float> want = widen(x);
  const std::vector<float> wide_y = widen(y);
  cpu::moe_combine(rows, hidden, k, want.data(), hidden, wide_y.data(), hidden, weights.data(), slots.data());
  for (int64_t i = 0; i < rows * hidden; ++i)
    EXPECT_NEAR(bf16_to_f32(got[i]), want[i], 1e-2 * (1.0 + std::abs(want[i]))) << "element " << i;
}

}  // namespace
}  // namespace mosaic::cuda
