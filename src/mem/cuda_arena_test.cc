// On a GPU: the VMM arena grows and shrinks in whole pages, keeps its base address and the data
// below the old top as it grows, reports out-of-memory without changing anything, and the plain
// fallback behaves the same from the outside. Skipped without a device.
#include "mem/cuda_arena.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace mosaic {
namespace {

class CudaArenaTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaArenaTest, GrowsKeepsDataAndShrinks) {
  const auto arena = make_cuda_arena(0, uint64_t{8} << 30, /*force_plain=*/GetParam());
  EXPECT_EQ(arena->uses_vmm(), !GetParam());
  const uint64_t page = arena->granularity();
  ASSERT_TRUE(arena->ensure(3 * page - 5));
  EXPECT_EQ(arena->mapped(), 3 * page);
  void* const base = arena->base();
  std::vector<uint32_t> pattern(page / 4);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint32_t>(i * 2654435761u);
  ASSERT_EQ(cudaMemcpy(base, pattern.data(), page, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(arena->ensure(7 * page));
  EXPECT_EQ(arena->mapped(), 7 * page);
  if (arena->uses_vmm()) {
    EXPECT_EQ(arena->base(), base);  // growth never moves the range
    std::vector<uint32_t> back(pattern.size());
    ASSERT_EQ(cudaMemcpy(back.data(), base, page, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, pattern);
  }
  ASSERT_EQ(cudaMemset(arena->base(), 0, 7 * page), cudaSuccess);  // every mapped byte writable
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  arena->shrink(2 * page);
  EXPECT_EQ(arena->mapped(), 2 * page);
  EXPECT_EQ(arena->high_water(), 7 * page);
}

TEST_P(CudaArenaTest, OutOfMemoryRollsBack) {
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  const auto arena = make_cuda_arena(0, total + (uint64_t{4} << 30), GetParam());
  ASSERT_TRUE(arena->ensure(arena->granularity()));
  EXPECT_FALSE(arena->ensure(total + (uint64_t{2} << 30)));  // more than the card has
  EXPECT_EQ(arena->mapped(), arena->granularity());
  ASSERT_TRUE(arena->ensure(2 * arena->granularity()));      // still usable afterwards
}

TEST_P(CudaArenaTest, HysteresisKeepsPagesForSimilarSteps) {
  const auto arena = make_cuda_arena(0, uint64_t{8} << 30, GetParam());
  const uint64_t page = arena->granularity();
  ASSERT_TRUE(arena->prepare_step(10 * page));
  ASSERT_TRUE(arena->prepare_step(6 * page));   // 10 pages <= 2 x 6: keep them
  EXPECT_EQ(arena->mapped(), 10 * page);
  ASSERT_TRUE(arena->prepare_step(4 * page));   // 10 > 2 x 4: give back down to 4
  EXPECT_EQ(arena->mapped(), 4 * page);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CudaArenaTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "plain" : "vmm"; });

}  // namespace
}  // namespace mosaic
