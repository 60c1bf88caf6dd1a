// Device discovery. cudaGetDeviceCount is the first runtime call a process makes: without a
// driver it fails (cudaErrorInsufficientDriver / cudaErrorNoDevice) instead of aborting, and that
// failure is the answer "no device".
#include "backend/cuda/device.h"

#include <cuda_runtime.h>

namespace mosaic::cuda {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error so later checked calls do not report it
    return 0;
  }
  return count;
}

std::optional<DeviceInfo> cuda_device_info(int ordinal) {
  if (ordinal < 0 || ordinal >= cuda_device_count()) return std::nullopt;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.total_memory_bytes = prop.totalGlobalMem;
  info.sm_count = prop.multiProcessorCount;
  info.l2_cache_bytes = static_cast<uint64_t>(prop.l2CacheSize);
  info.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  return info;
}

}  // namespace mosaic::cuda
