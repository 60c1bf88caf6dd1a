// fp32 matrix product against a weight stored as [out_features, in_features] ("NT" layout):
//   C[i, n] = sum_k A[row(i), k] * B[n, k]  (+ bias[n]),  or with `accumulate`  C[i, n] += that
//   (a residual add fused into the product: C + result, one fp32 addition)
// A is fp32; B may be fp32, bf16 or fp16 (converted exactly to fp32 as it is packed); C is fp32.
//
// Determinism contract (docs/design/cpu-gemm.md): every element of C is computed with one fixed
// sequence of floating-point operations that depends only on K — not on M, N, which rows or
// columns are computed in the same call, the thread count, or where the tile edges fall. Row
// chunking a product therefore gives bit-identical results, which Mosaic's exactness rests on.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace mosaic::cpu {

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;                        // elements between rows of A
  const int32_t* a_rows = nullptr;        // optional: row i of the product reads A row a_rows[i]
  const void* b = nullptr;
  DType b_dtype = DType::f32;
  int64_t ldb = 0;                        // elements between rows of B
  float* c = nullptr;
  int64_t ldc = 0;                        // elements between rows of C
  const float* bias = nullptr;            // optional, length n, added after the sum
  bool accumulate = false;                // C += product instead of C = product
};

// Runs on the OpenMP thread pool (parallel over column panels); called inside an active parallel
// region (as attention does from its tasks) it runs on the calling thread alone. Each thread keeps
// one packing buffer between calls: the fp32 copy of its B panels, about 192 KiB (12 * K bytes
// when that is larger).
void gemm_nt(const GemmArgs& args);

}  // namespace mosaic::cpu
