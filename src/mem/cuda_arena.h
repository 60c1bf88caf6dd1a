// The CUDA activation arena: one range of device addresses holding every planned tensor of a
// step at its planned offset. Two implementations:
//
//  - VMM (the default): a large virtual range is reserved once; physical pages of the device's
//    granularity (2 MiB on an H200) are created and mapped exactly up to what the step's plan
//    needs, and unmapped again when later steps need much less. Addresses never move, so
//    pointers (and captured CUDA graphs) stay valid as the arena grows.
//  - Plain (where VMM is unsupported): one cudaMalloc block, reallocated when a step needs more.
//
// Running out of device memory is an expected outcome, reported by ensure() returning false with
// the arena unchanged (partially created pages are rolled back); every other driver error aborts
// with the call named. Destructors never throw; they synchronise the device before unmapping.
//
// The driver API is reached at run time through cudaGetDriverEntryPointByVersion, so nothing
// links libcuda and a binary built with CUDA still starts on a machine without a GPU
// (docs/design/cuda-arena.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace mosaic {

class CudaArena {
 public:
  virtual ~CudaArena() = default;

  // Backs at least `bytes` from base(). False when the device is out of memory (nothing changed).
  virtual bool ensure(uint64_t bytes) = 0;
  // Gives back memory above `bytes` (rounded up to pages); waits for the device first.
  virtual void shrink(uint64_t bytes) = 0;

  virtual void* base() const = 0;
  virtual uint64_t mapped() const = 0;     // bytes backed now
  virtual uint64_t granularity() const = 0;
  virtual bool uses_vmm() const = 0;
  uint64_t high_water() const { return high_water_; }

  // A step that needs `bytes`: grow if needed; shrink when more than half of what is mapped
  // would sit idle (hysteresis: alternating step sizes do not map and unmap every step).
  bool prepare_step(uint64_t bytes);

 protected:
  uint64_t high_water_ = 0;
};

// True when the CUDA runtime sees at least one device (false without a driver; never aborts).
bool cuda_devices_visible();

// The device memory free now (before the engine allocates its own): the CUDA backend's budget
// when the user sets none. Throws mosaic::Error when the device is not usable.
uint64_t cuda_free_memory_bytes(int device);

// VMM when the device supports it, else plain allocation. `reserve_bytes` bounds the VMM range
// (default: the device's total memory). Throws mosaic::Error when no device is usable.
std::unique_ptr<CudaArena> make_cuda_arena(int device, uint64_t reserve_bytes = 0,
                                           bool force_plain = false);

}  // namespace mosaic
