// On a GPU: the KV cache's regions grow under pages in use without moving them or losing their
// rows, shrink back, and map whole granules only. Skipped without a device.
#include "mem/cuda_kv_cache.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace mosaic {
namespace {

TEST(CudaKvCache, GrowsUnderPagesInUseAndShrinks) {
  if (!cuda_devices_visible()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kLayers = 3, kKvDim = 256, kPageRows = 128;
  CudaKvCache cache(0, kLayers, kKvDim, kPageRows);
  EXPECT_EQ(cache.page_bytes(), uint64_t{2 * kLayers * kPageRows * kKvDim * 2});
  ASSERT_TRUE(cache.resize(3));
  const uint64_t region = 3 * kPageRows * kKvDim * 2, granule = cache.granularity();
  EXPECT_EQ(cache.bytes(), 2 * kLayers * ((region + granule - 1) / granule * granule));
  std::vector<void*> bases;
  std::vector<uint16_t> pattern(static_cast<size_t>(region / 2));
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint16_t>(i * 40503u);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (void* base : {cache.k(l), cache.v(l)}) {
      bases.push_back(base);
      ASSERT_EQ(cudaMemcpy(base, pattern.data(), region, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ASSERT_TRUE(cache.resize(40));  // several granules per region
  EXPECT_EQ(cache.pages(), 40);
  size_t r = 0;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (void* base : {cache.k(l), cache.v(l)}) {
      EXPECT_EQ(base, bases[r++]) << "a region moved";
      std::vector<uint16_t> back(pattern.size());
      ASSERT_EQ(cudaMemcpy(back.data(), base, region, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(back, pattern) << "layer " << l;
      ASSERT_EQ(cudaMemset(base, 0, 40 * kPageRows * kKvDim * 2), cudaSuccess);  // every page writable
    }
  }
  ASSERT_TRUE(cache.resize(0));
  EXPECT_EQ(cache.bytes(), 0u);
}

}  // namespace
}  // namespace mosaic
