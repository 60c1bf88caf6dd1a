// The CPU activation arena: one block of memory holding every planned tensor of a step at its
// planned offset. It grows to the plan's peak and shrinks (with hysteresis) when later steps
// need much less. Contents do not survive a resize: nothing lives in the arena across steps.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mosaic {

class CpuArena {
 public:
  CpuArena() = default;
  CpuArena(const CpuArena&) = delete;
  CpuArena& operator=(const CpuArena&) = delete;
  ~CpuArena();

  // Makes at least `bytes` available at base(). Reallocates when it must grow, or when `bytes`
  // is below half the current size. Throws mosaic::Error when the system refuses the memory.
  void reserve(uint64_t bytes);

  std::byte* base() const { return base_; }
  uint64_t size() const { return size_; }                // bytes held now ("mapped")
  uint64_t high_water() const { return high_water_; }    // largest size held so far

 private:
  std::byte* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t high_water_ = 0;
};

}  // namespace mosaic
