// A product of few rows at the speed of reading the weight (docs/design/small-rows-gemm.md):
// C[m, n] = A[m, k] B[n, k]^T in bf16 with fp32 accumulation, for m <= kSmallRowsMaxRows, with
// the Gemm's epilogues (bf16 C; `accumulate`: C += the product; or + bias[n]). cuBLASLt's
// split-K-free kernels tile such a product into a few CTAs and read the weight at ~1.6 TB/s on
// the H200; this one gives every CTA a narrow column strip of the weight and all of K, so that
// every SM streams weight bytes. It accumulates K in k16 steps in order, as Hopper's MMAs in
// cuBLASLt's kernels do, so its bits are meant to be the reference's; the Gemm uses it for a shape
// only after its first call showed the reference's bits (gemm.h, gemm_bit_check.h).
// Hopper only (wgmma, TMA): the kernel lives in the sm_90a object; elsewhere it is never launched.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/gemm.h"

namespace mosaic::cuda {

inline constexpr int64_t kSmallRowsMaxRows = 128;

// Whether the call's shape and pointers fit the kernel: bf16 C, 1 <= m <= kSmallRowsMaxRows, k a
// multiple of 64, n a multiple of 16, 16-byte aligned operands and rows.
bool small_rows_gemm_fits(const GemmArgs& args);
// Whether the current device runs it (compute capability 9.0 and this binary holds the kernel).
bool small_rows_gemm_available();
// The column strip each CTA takes for an n (16, 32, 64 or 128): the widest that still gives every SM
// a strip. `sm_count` <= 0 asks the current device.
int small_rows_gemm_strip(int64_t n, int sm_count = 0);
// Runs the product; `strip` 0 takes small_rows_gemm_strip(n). Requires small_rows_gemm_fits and
// small_rows_gemm_available (an internal error otherwise).
void small_rows_gemm(const GemmArgs& args, cudaStream_t stream, int strip = 0);

}  // namespace mosaic::cuda
