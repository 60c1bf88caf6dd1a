// Which CUDA devices this process can use and what each one is. Safe on a machine with no GPU or
// no driver: the count is then 0 and nothing aborts, so a binary built with CUDA starts there and
// falls back to the CPU backend (ARCHITECTURE.md, "Driver API without a link dependency").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mosaic::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;                          // e.g. "NVIDIA H200"
  int compute_major = 0, compute_minor = 0;  // compute capability, 9.0 for Hopper
  uint64_t total_memory_bytes = 0;
  int sm_count = 0;  // streaming multiprocessors
  uint64_t l2_cache_bytes = 0;
  uint64_t shared_memory_per_block_optin = 0;  // after cudaFuncSetAttribute raises the limit
};

// Number of usable CUDA devices; 0 when there is no driver, no device, or the runtime fails.
int cuda_device_count();

// Properties of device `ordinal`; nullopt when it does not exist.
std::optional<DeviceInfo> cuda_device_info(int ordinal);

}  // namespace mosaic::cuda
