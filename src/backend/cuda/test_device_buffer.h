// Device memory for the CUDA kernel tests: an owning buffer and copies to and from host vectors.
// Test-only (included by the *_test.cc of this module and of tests/gpu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace mosaic::cuda::testing_support {

struct DeviceBuffer {
  void* data = nullptr;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { MOSAIC_CUDA_CHECK(cudaMalloc(&data, std::max<size_t>(bytes, 1))); }
  template <typename T>  // a copy of `host` (upload, below)
  explicit DeviceBuffer(const std::vector<T>& host);
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  ~DeviceBuffer() { cudaFree(data); }
  bool try_allocate(size_t bytes) {  // false (error cleared) when the device lacks the memory
    if (cudaMalloc(&data, bytes) == cudaSuccess) return true;
    (void)cudaGetLastError();
    data = nullptr;
    return false;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <typename T>
void upload(DeviceBuffer& buffer, const T* host, size_t count) {
  MOSAIC_CUDA_CHECK(cudaMemcpy(buffer.data, host, count * sizeof(T), cudaMemcpyHostToDevice));
}
template <typename T>
void upload(DeviceBuffer& buffer, const std::vector<T>& host) {
  upload(buffer, host.data(), host.size());
}

template <typename T>
DeviceBuffer::DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
  upload(*this, host);
}

template <typename T>
std::vector<T> download(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  MOSAIC_CUDA_CHECK(cudaMemcpy(host.data(), buffer.data, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace mosaic::cuda::testing_support
