// bf16 matrix products through cuBLASLt with fp32 accumulation, against weights stored
// [out_features, in_features] (y = x W^T (+ bias)):
//   C[m, n] = sum_k A[m, k] * B[n, k]  (+ bias[n]),  A, B bf16; C bf16 or fp32;
// or, with `accumulate`, C[m, n] += the sum (one rounding of C + sum: a residual add fused into
// the product's epilogue, cuBLASLt's beta = 1 with C and D the same matrix).
//
// Determinism (ARCHITECTURE.md, "Exactness"): a (n, k, dtypes) computes the bits of one
// reference algorithm — cuBLASLt's first heuristic choice at the first m seen, no split-K — for
// every m, so row-chunked products are bit-identical to unchunked ones.
// Which algorithm runs: with GemmTuning::timed (the engine's default), per power-of-two bucket of
// m, the fastest of cuBLASLt's split-K-free candidates whose output on the bucket's first call is
// bit-identical to the reference's (gemm_tuning.h), for products of at least min_call_ms;
// otherwise the reference itself. Both compute the same bits.
// A Gemm serves one host thread and one stream at a time: its calls share one workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

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

// How a call's algorithm is chosen (above).
struct GemmTuning {
  bool timed = true;         // false: always the reference (cuBLASLt's first choice)
  double min_call_ms = 1.0;  // products whose reference call is faster keep the reference
};

struct GemmTuningRecord;  // gemm_tuning.h

inline constexpr uint64_t kDefaultGemmWorkspaceBytes = uint64_t{32} << 20;

class Gemm {
 public:
  // `workspace_bytes` of device memory is allocated once (counted in the engine's budget).
  explicit Gemm(uint64_t workspace_bytes = kDefaultGemmWorkspaceBytes,
                GemmTuning tuning = GemmTuning{});
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void run(const GemmArgs& args, cudaStream_t stream);
  uint64_t workspace_bytes() const;
  // One record per shape tuned so far, in the order they were pinned.
  const std::vector<GemmTuningRecord>& tuning_records() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic::cuda
