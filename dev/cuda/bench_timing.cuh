// Timing for the CUDA workbenches (attention_bench.cu, gemm_wgmma.cu): milliseconds per call of
// `launch`, back to back on the default stream after `warmups` untimed calls.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace mosaic::cuda {

template <typename Launch>
float time_ms(Launch launch, int repeats, int warmups = 1) {
  for (int i = 0; i < warmups; ++i) launch();
  cudaEvent_t start, stop;
  MOSAIC_CUDA_CHECK(cudaEventCreate(&start));
  MOSAIC_CUDA_CHECK(cudaEventCreate(&stop));
  MOSAIC_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < repeats; ++i) launch();
  MOSAIC_CUDA_CHECK(cudaEventRecord(stop));
  MOSAIC_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  MOSAIC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  MOSAIC_CUDA_CHECK(cudaEventDestroy(start));
  MOSAIC_CUDA_CHECK(cudaEventDestroy(stop));
  return ms / repeats;
}

}  // namespace mosaic::cuda
