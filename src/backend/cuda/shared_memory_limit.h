// A kernel that uses more than 48 KiB of dynamic shared memory must say so once per device
// before its first launch (cudaFuncAttributeMaxDynamicSharedMemorySize).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace mosaic::cuda {

// Raises `kernel`'s dynamic shared-memory limit to `bytes` on the current device, once per device:
// `configured` (one per kernel, static) holds one bit per device ordinal.
inline void raise_shared_limit(const void* kernel, int bytes, std::atomic<uint64_t>& configured) {
  int device = 0;
  MOSAIC_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (configured.load(std::memory_order_acquire) & bit) return;
  MOSAIC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  configured.fetch_or(bit, std::memory_order_release);
}

}  // namespace mosaic::cuda
