// SwiGLU's arithmetic on one element, shared by the SwiGLU kernel (elementwise.cu) and the
// products that apply it in their epilogue (gate_up_swiglu_sm90.cu, dev/cuda/gemm_wgmma.cu), so
// that all give the same bits. g and u are the bf16 gate and up values, widened to fp32; the
// result is rounded by the caller. Include only from .cu files.
#pragma once

namespace mosaic::cuda {

// silu(g) u = g / (1 + e^-g) u in fp32 (-0 for g << 0).
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

}  // namespace mosaic::cuda
