// The CUDA backend's KV cache memory (docs/design/kv-cache.md): per layer a K and a V region of
// bf16 rows, row r holding one position's K (or V) over the kv heads; page j of the pool is rows
// [j P, (j + 1) P) of every region. Each region is a CUDA virtual-memory range (mem/cuda_arena.h)
// mapped in whole granules (2 MiB on an H200) exactly up to the pages in use, so the cache grows
// and shrinks under sequences that hold pages without moving them. Which sequence holds which
// pages is cache/kv_page_pool.h's business.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mem/cuda_arena.h"

namespace mosaic {

class CudaKvCache {
 public:
  // Throws mosaic::Error when the device cannot map memory piecewise (no VMM support): the
  // cache must not move while it grows.
  CudaKvCache(int device, int64_t layers, int64_t kv_dim, int64_t page_rows);

  // Backs pages [0, pages) of every region. False when the device is out of memory (nothing changed).
  bool resize(int64_t pages);
  int64_t pages() const { return pages_; }

  void* k(int64_t layer) const { return regions_[static_cast<size_t>(2 * layer)]->base(); }
  void* v(int64_t layer) const { return regions_[static_cast<size_t>(2 * layer + 1)]->base(); }
  uint64_t page_bytes() const;   // one page over every layer, K and V
  uint64_t bytes() const;        // device memory mapped now
  uint64_t granularity() const;  // the unit each region maps

 private:
  uint64_t region_bytes(int64_t pages) const;

  int64_t layers_, row_bytes_, page_rows_;
  int64_t pages_ = 0;
  std::vector<std::unique_ptr<CudaArena>> regions_;  // [layer][K, V]
};

}  // namespace mosaic
