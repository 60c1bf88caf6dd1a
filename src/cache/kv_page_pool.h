// The KV cache's page bookkeeping (docs/design/kv-cache.md): which fixed-size pages of the pool
// each cached sequence holds. A page holds the K and V of `page_rows` consecutive positions of
// one sequence, in every layer; page j of the pool is rows [j P, (j + 1) P) of each layer's K and
// V regions. Sequences take whole pages, lowest free ones first, and give them back at once when
// they end, so the pool never fragments and its backing memory need only cover the highest page
// in use (high_water). Pure bookkeeping: the backing memory lives in mem/ (CPU, CUDA VMM).
//
//   KvPagePool pool(16);
//   const uint64_t id = pool.reserve(pool.pages_for(100));   // 7 pages for 100 positions
//   std::span<const int32_t> pages = pool.pages(id);          // ascending page numbers
//   pool.release(id);
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

namespace mosaic {

class KvPagePool {
 public:
  explicit KvPagePool(int64_t page_rows);

  int64_t page_rows() const { return page_rows_; }
  int64_t pages_for(int64_t positions) const { return (positions + page_rows_ - 1) / page_rows_; }

  // A sequence's `pages` pages; returns its id (never 0). The caller checks the budget first.
  uint64_t reserve(int64_t pages);
  // Gives a sequence's pages back (an unknown id: nothing).
  void release(uint64_t id);
  bool holds(uint64_t id) const { return sequences_.contains(id); }
  std::span<const int32_t> pages(uint64_t id) const;  // id must be held

  int64_t used() const { return used_; }               // pages held by sequences
  int64_t sequences() const { return static_cast<int64_t>(sequences_.size()); }
  // One past the highest page in use: how many pages the backing memory must cover.
  int64_t high_water() const;
  // Pages below high_water() that nobody holds (taken first by the next reservations).
  int64_t free_below_high_water() const { return high_water() - used_; }
  // The high water after reserving `pages` more (the lowest free pages go first).
  int64_t high_water_after(int64_t pages) const;

 private:
  int64_t page_rows_;
  std::set<int32_t> free_;       // freed pages below the top, lowest first
  int32_t top_ = 0;              // pages [0, top_) have been handed out at least once
  int64_t used_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::vector<int32_t>> sequences_;
};

}  // namespace mosaic
