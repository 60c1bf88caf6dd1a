// The grouped expert product for few rows per expert (moe.h: ExpertGemmKernel::few_rows), called
// by expert_gemm. Its arguments are expert_gemm's, already checked.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/moe.h"

namespace mosaic::cuda {

void expert_gemm_few_rows(const ExpertGemmArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
