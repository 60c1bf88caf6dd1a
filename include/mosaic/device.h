// Which accelerator Mosaic would use: the GPU the engine picks with device "auto", if any.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mosaic {

struct GpuInfo {
  int index = 0;
  std::string name;                          // e.g. "NVIDIA H200"
  int compute_major = 0, compute_minor = 0;  // 9.0 for Hopper
  uint64_t total_bytes = 0;                  // device memory
};

// The CUDA device `index` when Mosaic was built with CUDA and the device is visible; nullopt
// otherwise (no driver, no device, a CPU-only build). Never throws.
std::optional<GpuInfo> visible_gpu(int index = 0);

}  // namespace mosaic
