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

// A launcher's precondition: its failure is an invariant violation of the caller, printed with the
// function and aborted (this file's tier). core/error.h is not usable in .cu files: nvcc rejects
// fmt's consteval checks.
#define MOSAIC_CUDA_REQUIRE(cond)                                                           \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "mosaic: internal error at %s:%d: %s: %s\n", __FILE__, __LINE__, \
                   __func__, #cond);                                                        \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
