// Does another cuBLASLt algorithm, or another kernel, compute the same bits as a shape's reference
// algorithm on one call? (docs/design/gemm-algorithms.md, docs/design/small-rows-gemm.md.)
//
// Both run on the call's own operands, into the call's own C, and the two outputs' hashes are
// compared. A product that accumulates into C (the residual add) has C copied to host memory
// first and restored before each run and at the end, so no device memory beyond the engine's
// budget is taken and the call finds C as it was.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "backend/cuda/gemm.h"

namespace mosaic::cuda {

struct BitCheckCall {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;  // with the bias pointer already set, if any
  GemmArgs args;                        // the real call: operands, strides, accumulate
  // The call's layouts in cuBLASLt's column-major view (gemm.cu's top comment), for args.m rows.
  cublasLtMatrixLayout_t weight = nullptr, activation = nullptr, output = nullptr;
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Whether the stream may synchronise now (it is not being captured into a CUDA graph).
bool bit_check_possible(cudaStream_t stream);

// True when the outputs of both algorithms are equal bit for bit (equal hashes of every element;
// a difference anywhere is missed with probability ~2^-64). Both must run the call
// (cublasLtMatmulAlgoCheck; the Gemm asks before); false if cuBLASLt refuses either anyway. Leaves C as the
// call found it when the call accumulates, otherwise holding the (reference's) product.
bool same_bits_on_call(const BitCheckCall& call, const cublasLtMatmulAlgo_t& reference,
                       const cublasLtMatmulAlgo_t& candidate);

// The same for any two ways of computing the call's product: each runs it into args.c on `stream`
// (false: it could not run), from C as the call found it. The candidate runs first. With
// `timed_rounds` > 0 and the same bits, both are then timed (that many alternating rounds of
// three runs each, the fastest round of each kept; C is restored afterwards when the call
// accumulates): two ways with the same bits may differ in speed by shape, and which is faster
// does not change a step's outputs.
struct RunComparison {
  bool same_bits = false;
  float reference_ms = 0, candidate_ms = 0;  // per run, when timed
};
RunComparison compare_runs(const GemmArgs& args, cudaStream_t stream, const std::function<bool()>& reference,
                           const std::function<bool()>& candidate, int timed_rounds = 0);

}  // namespace mosaic::cuda
