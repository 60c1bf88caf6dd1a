#include "mem/cuda_kv_cache.h"

#include <cuda_runtime.h>

#include "core/error.h"

namespace mosaic {

CudaKvCache::CudaKvCache(int device, int64_t layers, int64_t kv_dim, int64_t page_rows)
    : layers_(layers), row_bytes_(kv_dim * 2), page_rows_(page_rows) {
  MOSAIC_ASSERT(layers > 0 && kv_dim > 0 && page_rows > 0, "KV cache of {} layers, {} columns, {} rows a page",
                layers, kv_dim, page_rows);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    fail("CUDA device {} is not available for the KV cache", device);
  }
  // Addresses for the whole device's memory, shared out over the regions: no region can outgrow
  // its range before the device runs out.
  const uint64_t reserve = total_bytes / static_cast<uint64_t>(2 * layers) + (uint64_t{2} << 20);
  for (int64_t r = 0; r < 2 * layers; ++r) {
    regions_.push_back(make_cuda_arena(device, reserve));
    if (!regions_.back()->uses_vmm())
      fail("the KV cache needs CUDA virtual memory management, which device {} does not offer", device);
  }
}

uint64_t CudaKvCache::page_bytes() const {
  return static_cast<uint64_t>(2 * layers_ * page_rows_ * row_bytes_);
}

uint64_t CudaKvCache::granularity() const { return regions_.front()->granularity(); }

uint64_t CudaKvCache::region_bytes(int64_t pages) const {
  return static_cast<uint64_t>(pages * page_rows_ * row_bytes_);
}

uint64_t CudaKvCache::bytes() const {
  uint64_t total = 0;
  for (const auto& region : regions_) total += region->mapped();
  return total;
}

bool CudaKvCache::resize(int64_t pages) {
  MOSAIC_ASSERT(pages >= 0, "KV cache of {} pages", pages);
  if (pages == pages_) return true;
  const uint64_t bytes = region_bytes(pages);
  if (pages > pages_) {
    for (size_t r = 0; r < regions_.size(); ++r) {
      if (!regions_[r]->ensure(bytes)) {
        for (size_t back = 0; back < r; ++back) regions_[back]->shrink(region_bytes(pages_));
        return false;
      }
    }
  } else {
    for (const auto& region : regions_) region->shrink(bytes);
  }
  pages_ = pages;
  return true;
}

}  // namespace mosaic
