// bf16 matrix products through cuBLASLt with fp32 accumulation, against weights stored
// [out_features, in_features] (y = x W^T (+ bias)):
//   C[m, n] = sum_k A[m, k] * B[n, k]  (+ bias[n]),  A, B bf16; C bf16 or fp32;
// or, with `accumulate`, C[m, n] += the sum (one rounding of C + sum: a residual add fused into
// the product's epilogue, cuBLASLt's beta = 1 with C and D the same matrix).
//
// Determinism (ARCHITECTURE.md, "Exactness"): a (n, k, dtypes) computes the bits of one
// reference algorithm for every m — cuBLASLt's first heuristic choice for kReferenceRows rows,
// no split-K, whatever m the shape sees first — so row-chunked products are bit-identical to
// unchunked ones. Products of at least kReferenceRows rows run the reference. A smaller power-of-
// two bucket of rows runs cuBLASLt's own first choice for the bucket (smaller tiles, more CTAs)
// when that choice computed the reference's bits on the bucket's first call (gemm_bit_check.h),
// else the reference (docs/design/gemm-algorithms.md). A bf16 product of at most kSmallRowsMaxRows
// rows runs the small-rows kernel (small_rows_gemm.h) when, on the shape's first such call, it
// computed the reference's bits and ran faster than cuBLASLt (docs/design/small-rows-gemm.md),
// decided apart for the plain and the accumulating form (their epilogues are its own code);
// MOSAIC_SMALL_ROWS_GEMM=0 turns it off.
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

inline constexpr uint64_t kDefaultGemmWorkspaceBytes = uint64_t{32} << 20;
// The row count whose heuristic choice is a shape's reference algorithm (above).
inline constexpr int64_t kReferenceRows = 4096;

// How a row bucket below kReferenceRows chose its algorithm (Gemm::bucket_choices).
struct GemmBucketChoice {
  int64_t n = 0, k = 0, bucket = 0;
  DType c_dtype = DType::bf16;
  bool bias = false;
  bool own_choice_differs = false;  // cuBLASLt's first choice for the bucket is not the reference
  bool same_bits = false;           // and it computed the reference's bits on the first call
  bool small_rows_kernel = false;   // the candidate was the small-rows kernel, not cuBLASLt's
  bool accumulate = false;          // small-rows: the += C form, decided apart from the plain one
  float reference_ms = 0, candidate_ms = 0;  // the small-rows kernel's timing, when same_bits
  bool faster = false;                       // the small-rows kernel ran faster: it is used
  bool uses_own_choice() const { return own_choice_differs && same_bits && (!small_rows_kernel || faster); }
};

class Gemm {
 public:
  // `workspace_bytes` of device memory is allocated once (counted in the engine's budget).
  explicit Gemm(uint64_t workspace_bytes = kDefaultGemmWorkspaceBytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void run(const GemmArgs& args, cudaStream_t stream);
  uint64_t workspace_bytes() const;
  // One per (shape, bucket below kReferenceRows) seen so far, in the order they were first seen.
  const std::vector<GemmBucketChoice>& bucket_choices() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mosaic::cuda
