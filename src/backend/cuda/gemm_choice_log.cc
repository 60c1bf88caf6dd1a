// Host C++ apart from gemm.cu: fmt is not for nvcc's front end.
#include "backend/cuda/gemm_choice_log.h"

#include "core/log.h"

namespace mosaic::cuda {

void log_bucket_choice(const GemmBucketChoice& choice) {
  if (choice.small_rows_kernel) {
    if (!choice.same_bits) {
      log(LogLevel::info, "gemm: n={} k={} bf16{}{}, rows up to {}: cuBLASLt (the small-rows kernel computes other bits)",
          choice.n, choice.k, choice.bias ? " bias" : "", choice.accumulate ? " +=" : "", choice.bucket);
    } else {
      log(LogLevel::info, "gemm: n={} k={} bf16{}{}, rows up to {}: {} (the same bits; small-rows {:.4f} ms, cuBLASLt {:.4f} ms)",
          choice.n, choice.k, choice.bias ? " bias" : "", choice.accumulate ? " +=" : "", choice.bucket,
          choice.faster ? "the small-rows kernel" : "cuBLASLt", choice.candidate_ms, choice.reference_ms);
    }
    return;
  }
  log(LogLevel::info, "gemm: n={} k={} {}{}, rows up to {}: {}", choice.n, choice.k,
      choice.c_dtype == DType::f32 ? "f32" : "bf16", choice.bias ? " bias" : "", choice.bucket,
      !choice.own_choice_differs ? "cuBLASLt's choice is the reference"
      : choice.same_bits         ? "cuBLASLt's own choice (the reference's bits)"
                                 : "the reference (cuBLASLt's own choice computes other bits)");
}

}  // namespace mosaic::cuda
