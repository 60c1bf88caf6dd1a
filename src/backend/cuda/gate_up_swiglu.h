// The gate and up projections of a SwiGLU feed-forward block and the SwiGLU between them, in one
// Hopper kernel (sm_90a: TMA, warpgroup MMAs, paired CTAs):
//   out[m, f] = bf16( silu(bf16(x W_gate^T)[m, f]) * bf16(x W_up^T)[m, f] )
// bit for bit what Gemm (gate), Gemm (up) and swiglu() (elementwise.h) compute one after the
// other, without writing the two [m, f] products and reading them back
// (docs/design/gate-up-swiglu.md). A row's bits do not depend on m, so row chunks of a product
// equal the whole product.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mosaic::cuda {

struct GateUpSwigluArgs {
  int64_t m = 0, k = 0, f = 0;
  const void* x = nullptr;     int64_t x_stride = 0;       // bf16 [m, k]
  const void* gate = nullptr;                              // bf16 [f, k] (nn.Linear's weight)
  const void* up = nullptr;    int64_t weight_stride = 0;  // bf16 [f, k], both with this row stride
  void* out = nullptr;         int64_t out_stride = 0;     // bf16 [m, f]
};

// The shape and layout the kernel takes: k a multiple of 64, f of 128, every matrix 16-byte
// aligned with a row stride that is a multiple of 8 elements, m >= 0.
bool gate_up_swiglu_shape_fits(const GateUpSwigluArgs& args);
// True when the current device is compute capability 9.0, this binary carries the kernel, and the
// device holds a pair of its CTAs (two SMs of one GPC).
bool gate_up_swiglu_available();

// Requires gate_up_swiglu_available() and gate_up_swiglu_shape_fits(args); aborts otherwise.
void gate_up_swiglu(const GateUpSwigluArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
