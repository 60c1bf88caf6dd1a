// Host C++ apart from gemm.cu: fmt is not for nvcc's front end.
#include "backend/cuda/gemm_choice_log.h"

#include "core/log.h"

namespace mosaic::cuda {

void log_bucket_choice(const GemmBucketChoice& choice) {
  log(LogLevel::info, "gemm: n={} k={} {}{}, rows up to {}: {}", choice.n, choice.k,
      choice.c_dtype == DType::f32 ? "f32" : "bf16", choice.bias ? " bias" : "", choice.bucket,
      !choice.own_choice_differs ? "cuBLASLt's choice is the reference"
      : choice.same_bits         ? "cuBLASLt's own choice (the reference's bits)"
                                 : "the reference (cuBLASLt's own choice computes other bits)");
}

}  // namespace mosaic::cuda
