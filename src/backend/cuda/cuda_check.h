// Every CUDA runtime / cuBLAS call is checked; a failure names the call, file and line.
// Invariant-level failures (a kernel launch that cannot fail on valid arguments) abort; errors a
// caller can recover from (out of memory) are returned by the functions that expect them.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define MOSAIC_CUDA_CHECK(call)                                                          \
  do {                                                                                   \
    const cudaError_t mosaic_cuda_status = (call);                                       \
    if (mosaic_cuda_status != cudaSuccess) {                                             \
      std::fprintf(stderr, "mosaic: CUDA error at %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(mosaic_cuda_status));                              \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define MOSAIC_CUDA_CHECK_LAUNCH() MOSAIC_CUDA_CHECK(cudaGetLastError())
