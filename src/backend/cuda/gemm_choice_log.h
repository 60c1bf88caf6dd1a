// The info-level log line of a row bucket's algorithm choice (gemm.h; MOSAIC_LOG=info).
#pragma once

#include "backend/cuda/gemm.h"

namespace mosaic::cuda {

void log_bucket_choice(const GemmBucketChoice& choice);

}  // namespace mosaic::cuda
