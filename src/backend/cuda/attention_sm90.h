// The Hopper (sm_90a, wgmma) variant of cuda::attention for head_dim 128: same arguments, same
// contract, same per-row arithmetic as the portable kernel (attention.cu dispatches to it).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/attention.h"

namespace mosaic::cuda {

// True when the current device is compute capability 9.0 and this binary carries the kernel.
bool hopper_attention_available();

// Requires head_dim 128 and arguments attention() has validated.
void hopper_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
