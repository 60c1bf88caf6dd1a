#include "mosaic/device.h"

#ifdef MOSAIC_HAVE_CUDA
#include "backend/cuda/device.h"
#endif

namespace mosaic {

std::optional<GpuInfo> visible_gpu(int index) {
#ifdef MOSAIC_HAVE_CUDA
  if (index < 0 || index >= cuda::cuda_device_count()) return std::nullopt;
  const std::optional<cuda::DeviceInfo> device = cuda::cuda_device_info(index);
  if (!device) return std::nullopt;
  return GpuInfo{index, device->name, device->compute_major, device->compute_minor,
                 device->total_memory_bytes};
#else
  (void)index;
  return std::nullopt;
#endif
}

}  // namespace mosaic
