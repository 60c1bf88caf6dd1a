// The CPU backend's KV cache memory (docs/design/kv-cache.md): per layer, a K and a V region of
// `pages` pages of `page_rows` rows each, row r of a region holding one position's fp32 K (or V)
// over the kv heads. Page numbers and which sequence holds them are cache/kv_page_pool.h's.
// Contents survive growth (the regions are copied when they move), so the pool grows while
// sequences hold pages; resize() to fewer pages drops the pages above.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mosaic {

class CpuKvCache {
 public:
  CpuKvCache(int64_t layers, int64_t kv_dim, int64_t page_rows);

  // Backs pages [0, pages) of every region.
  void resize(int64_t pages);
  int64_t pages() const { return pages_; }

  float* k(int64_t layer) { return regions_[static_cast<size_t>(2 * layer)].data(); }
  float* v(int64_t layer) { return regions_[static_cast<size_t>(2 * layer + 1)].data(); }
  uint64_t page_bytes() const;  // one page over every layer, K and V
  uint64_t bytes() const { return page_bytes() * static_cast<uint64_t>(pages_); }

 private:
  int64_t layers_, kv_dim_, page_rows_;
  int64_t pages_ = 0;
  std::vector<std::vector<float>> regions_;  // [layer][K, V]
};

}  // namespace mosaic
