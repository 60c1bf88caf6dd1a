#include "cache/kv_page_pool.h"

#include <algorithm>

#include "core/error.h"

namespace mosaic {

KvPagePool::KvPagePool(int64_t page_rows) : page_rows_(page_rows) {
  MOSAIC_ASSERT(page_rows > 0, "KV cache pages of {} positions", page_rows);
}

uint64_t KvPagePool::reserve(int64_t pages) {
  MOSAIC_ASSERT(pages >= 0 && pages < (int64_t{1} << 30), "a reservation of {} pages", pages);
  std::vector<int32_t> taken;
  taken.reserve(static_cast<size_t>(pages));
  while (static_cast<int64_t>(taken.size()) < pages && !free_.empty()) {
    taken.push_back(*free_.begin());
    free_.erase(free_.begin());
  }
  while (static_cast<int64_t>(taken.size()) < pages) taken.push_back(top_++);
  std::sort(taken.begin(), taken.end());
  used_ += pages;
  const uint64_t id = next_id_++;
  sequences_.emplace(id, std::move(taken));
  return id;
}

void KvPagePool::release(uint64_t id) {
  const auto found = sequences_.find(id);
  if (found == sequences_.end()) return;
  for (const int32_t page : found->second) free_.insert(page);
  used_ -= static_cast<int64_t>(found->second.size());
  sequences_.erase(found);
  // Pages at the top that nobody holds are no longer handed out: the backing may shrink there.
  while (top_ > 0 && free_.contains(top_ - 1)) free_.erase(--top_);
}

std::span<const int32_t> KvPagePool::pages(uint64_t id) const {
  const auto found = sequences_.find(id);
  MOSAIC_ASSERT(found != sequences_.end(), "KV cache sequence {} is not held", id);
  return found->second;
}

int64_t KvPagePool::high_water() const { return top_; }

int64_t KvPagePool::high_water_after(int64_t pages) const {
  const int64_t from_free = std::min<int64_t>(pages, static_cast<int64_t>(free_.size()));
  return top_ + (pages - from_free);
}

}  // namespace mosaic
