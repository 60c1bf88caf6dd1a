#include "mem/cpu_arena.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace mosaic {
namespace {

constexpr uint64_t kGranule = 64 * 1024;  // sizes are rounded to this; the base is page aligned

}  // namespace

CpuArena::~CpuArena() { std::free(base_); }

void CpuArena::reserve(uint64_t bytes) {
  const uint64_t wanted = (bytes + kGranule - 1) / kGranule * kGranule;
  if (wanted <= size_ && wanted >= size_ / 2) return;
  std::free(base_);
  base_ = nullptr;
  size_ = 0;
  if (wanted == 0) return;
  base_ = static_cast<std::byte*>(std::aligned_alloc(4096, wanted));
  if (base_ == nullptr) fail("cannot allocate a {}-byte activation arena", wanted);
  size_ = wanted;
  high_water_ = std::max(high_water_, size_);
}

}  // namespace mosaic
