#include "exec/device_canvases.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace mosaic {

DeviceCanvases::~DeviceCanvases() {
  for (auto& [id, canvas] : canvases_) cudaFree(canvas.device);  // cudaFree waits for the device
}

int32_t* DeviceCanvases::hold(uint64_t id, std::span<const int32_t> ids) {
  MOSAIC_ASSERT(id != 0, "canvas id 0 means no canvas");
  Canvas& canvas = canvases_[id];
  if (canvas.device != nullptr && std::ranges::equal(canvas.host, ids)) return canvas.device;
  if (canvas.device == nullptr || canvas.host.size() != ids.size()) {
    if (canvas.device != nullptr) MOSAIC_CUDA_CHECK(cudaFree(canvas.device));
    canvas.device = nullptr;
    MOSAIC_CUDA_CHECK(cudaMalloc(&canvas.device, std::max<size_t>(ids.size_bytes(), 4)));
  }
  canvas.host.assign(ids.begin(), ids.end());
  // From pageable memory the call returns once the data is staged: `host` may change after it.
  MOSAIC_CUDA_CHECK(cudaMemcpyAsync(canvas.device, canvas.host.data(), ids.size_bytes(), cudaMemcpyHostToDevice,
                                    stream_));
  ++uploads_;
  return canvas.device;
}

void DeviceCanvases::record_commit(uint64_t id, std::span<const int32_t> positions,
                                   std::span<const CommittedRow> rows) {
  const auto found = canvases_.find(id);
  MOSAIC_ASSERT(found != canvases_.end(), "canvas {} is not held", id);
  MOSAIC_ASSERT(positions.size() == rows.size(), "one committed row per position");
  std::vector<int32_t>& host = found->second.host;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].committed) continue;
    MOSAIC_ASSERT(positions[i] >= 0 && static_cast<size_t>(positions[i]) < host.size(), "position {} outside canvas {}",
                  positions[i], id);
    host[static_cast<size_t>(positions[i])] = rows[i].token;
  }
}

void DeviceCanvases::release(uint64_t id) {
  const auto found = canvases_.find(id);
  if (found == canvases_.end()) return;
  MOSAIC_CUDA_CHECK(cudaFree(found->second.device));
  canvases_.erase(found);
}

std::vector<int32_t> DeviceCanvases::download(uint64_t id) const {
  const auto found = canvases_.find(id);
  if (found == canvases_.end()) return {};
  std::vector<int32_t> ids(found->second.host.size());
  MOSAIC_CUDA_CHECK(cudaMemcpyAsync(ids.data(), found->second.device, ids.size() * sizeof(int32_t),
                                    cudaMemcpyDeviceToHost, stream_));
  MOSAIC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ids;
}

}  // namespace mosaic
