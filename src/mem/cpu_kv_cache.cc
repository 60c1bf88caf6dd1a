#include "mem/cpu_kv_cache.h"

#include "core/error.h"

namespace mosaic {

CpuKvCache::CpuKvCache(int64_t layers, int64_t kv_dim, int64_t page_rows)
    : layers_(layers), kv_dim_(kv_dim), page_rows_(page_rows), regions_(static_cast<size_t>(2 * layers)) {
  MOSAIC_ASSERT(layers > 0 && kv_dim > 0 && page_rows > 0, "KV cache of {} layers, {} columns, {} rows a page",
                layers, kv_dim, page_rows);
}

uint64_t CpuKvCache::page_bytes() const {
  return static_cast<uint64_t>(2 * layers_ * page_rows_ * kv_dim_) * sizeof(float);
}

void CpuKvCache::resize(int64_t pages) {
  MOSAIC_ASSERT(pages >= 0, "KV cache of {} pages", pages);
  if (pages == pages_) return;
  const size_t elements = static_cast<size_t>(pages * page_rows_ * kv_dim_);
  try {
    for (std::vector<float>& region : regions_) {
      region.resize(elements);
      if (pages < pages_) region.shrink_to_fit();
    }
  } catch (const std::bad_alloc&) {
    fail("the system refused {} bytes for the KV cache ({} pages)", page_bytes() * static_cast<uint64_t>(pages),
         pages);
  }
  pages_ = pages;
}

}  // namespace mosaic
