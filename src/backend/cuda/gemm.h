// bf16 matrix products through cuBLASLt with fp32 accumulation, against weights stored
// [out_features, in_features] (y = x W^T (+ bias)):
//   C[m, n] = sum_k A[m, k] * B[n, k]  (+ bias[n]),  A, B bf16; C bf16 or fp32;
// or, with `accumulate`, C[m, n] += the sum (one rounding of C + sum: a residual add fused into
// the product's epilogue, cuBLASLt's beta = 1 with C and D the same matrix).
//
// Determinism (ARCHITECTURE.md, "Exactness"): one algorithm per (n, k, dtypes) is chosen once
// and reused for every m, with no split-K, so a row of C is computed the same way whatever m is
// — row-chunked products are bit-identical to unchunked ones.
// A Gemm serves one host thread and one stream at a time: its calls share one workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace mosaic::cuda {

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  int64_t lda = 0;   // bf16 [m, k], row stride lda
  const void* b = nullptr;  int64_t ldb = 0;   // bf16 [n, k] (the weight), row stride ldb
  void* c = nullptr;        int64_t ldc = 0;   // [m, n], row stride ldc
  DType c_dtype = DType::bf16;                 // bf16 or f32
  const void* bias = nullptr;                  // bf16 [n] or null
  bool accumulate = false;                     // C += product (no bias with it)
};

class Gemm {
 public:
  // `workspace_bytes` of device memory is allocated once (counted in the engine's budget).
  explicit Gemm(uint64_t workspace_bytes = uint64_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void run(const GemmArgs& args, cudaStream_t stream);
  uint64_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic::cuda
