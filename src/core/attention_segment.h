// One run of query rows and the run of key/value rows they attend to. Packed batches, query
// chunks, candidate-only rows and block-causal key ranges are all lists of these; graph and
// kernels share the type.
#pragma once

#include <cstdint>

namespace mosaic {

struct AttentionSegment {
  int64_t q_begin = 0, q_count = 0;    // rows of q / out
  int64_t kv_begin = 0, kv_count = 0;  // rows of k / v, or with kv_pages the key positions
  // -1: the keys are rows [kv_begin, kv_begin + kv_count) of K and V. Otherwise they live in a
  // paged KV cache (docs/design/kv-cache.md): key position p (kv_begin <= p < kv_begin + kv_count,
  // kv_begin a multiple of the page size) is row pages[kv_pages + p / page_rows] * page_rows +
  // p % page_rows of K and V, `pages` the page table the attention op is given.
  int64_t kv_pages = -1;

  bool paged() const { return kv_pages >= 0; }
};

// Where a paged key position lives: its row in the cache's K and V.
inline int64_t paged_key_row(const int32_t* pages, int64_t page_rows, const AttentionSegment& s, int64_t p) {
  return int64_t{pages[s.kv_pages + p / page_rows]} * page_rows + p % page_rows;
}

}  // namespace mosaic
