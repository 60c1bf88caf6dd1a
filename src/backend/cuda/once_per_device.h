// A question about the current device asked once per device ordinal and remembered: which
// kernels it runs, how many clusters of a kernel it holds at once, how many SMs it has. Host code.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace mosaic::cuda {

// Asks `ask(device)` once per device ordinal of the current device: one bit per device says
// "asked", one the answer. False when there is no current device.
template <typename Ask>
bool once_per_device(std::atomic<uint64_t>& asked, std::atomic<uint64_t>& answers, Ask ask) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const uint64_t bit = uint64_t{1} << (device & 63);
  if (!(asked.load(std::memory_order_acquire) & bit)) {
    if (ask(device)) answers.fetch_or(bit, std::memory_order_relaxed);
    asked.fetch_or(bit, std::memory_order_release);
  }
  return answers.load(std::memory_order_relaxed) & bit;
}

// The same for a count (>= 0): `known` (static, one per question) holds per device ordinal 0 until
// asked, then the answer + 1. 0 when there is no current device.
template <typename Ask>
int count_once_per_device(std::atomic<int> (&known)[64], Ask ask) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  std::atomic<int>& slot = known[device & 63];
  int value = slot.load(std::memory_order_acquire);
  if (value == 0) {
    value = ask(device) + 1;
    slot.store(value, std::memory_order_release);
  }
  return value - 1;
}

// The current device's SM count, asked once per device (0 when there is none).
inline int device_sm_count() {
  static std::atomic<int> known[64] = {};
  return count_once_per_device(known, [](int device) {
    int count = 0;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return count;
  });
}

// Whether `device` is compute capability 9.0 (the only one sm_90a code runs on) and this binary
// holds `kernel` for it.
inline bool device_runs_sm90a_kernel(int device, const void* kernel) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (major != 9 || minor != 0) return false;
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace mosaic::cuda
