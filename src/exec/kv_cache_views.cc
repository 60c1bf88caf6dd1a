#include "exec/kv_cache_views.h"

#include "core/error.h"

namespace mosaic {

void add_cache_views(const KvPagePool& pool, std::span<const SequenceRows> sequences, StepShape& shape,
                     PackedBatch& packed) {
  const int64_t page_rows = pool.page_rows();
  shape.page_rows = page_rows;
  shape.cached.clear();
  packed.kv_rows.clear();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const SequenceRows& sequence = sequences[s];
    MOSAIC_ASSERT(sequence.cached(), "sequence {} of a cached step has no cache", s);
    if (!pool.holds(sequence.cache_id)) fail("sequence {}: KV cache {} is not held by this engine", s, sequence.cache_id);
    const std::span<const int32_t> pages = pool.pages(sequence.cache_id);
    const int64_t keys = static_cast<int64_t>(sequence.ids.size());
    if (static_cast<int64_t>(pages.size()) * page_rows < keys)
      fail("sequence {}: its KV cache holds {} positions, its canvas has {}", s,
           static_cast<int64_t>(pages.size()) * page_rows, keys);
    shape.cached.push_back({sequence.begin, keys, std::vector<int32_t>(pages.begin(), pages.end())});
    for (int64_t p = sequence.begin; p < sequence.end; ++p)
      packed.kv_rows.push_back(pages[static_cast<size_t>(p / page_rows)] * static_cast<int32_t>(page_rows) +
                               static_cast<int32_t>(p % page_rows));
  }
}

}  // namespace mosaic
