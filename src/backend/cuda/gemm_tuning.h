// Timing cuBLASLt's candidate algorithms for one product shape, once, on the call's own operands
// (docs/design/gemm-tuning.md).
//
// cuBLASLt's heuristic ranks its algorithms by a model, not by running them; on the H200 its first
// choice for the step's large products is up to ~10 % slower than another candidate it lists,
// and the best one changes with m. So the Gemm (gemm.h) times, on the first call of each
// power-of-two bucket of m, the shape's reference algorithm and the bucket's split-K-free
// candidates, and runs the fastest whose output on that call is bit-identical to the
// reference's. Tuning therefore picks speed only, never different numbers: a tuned engine
// computes the same bits as an untuned one, and row chunks in different buckets the same bits
// as one whole call.
//
// The call's C is the timing output: a plain product overwrites it anyway (the real call runs
// again after tuning); a product that accumulates into C (the residual add) has C copied to host
// memory first and restored before each bit check and at the end, so no device memory beyond
// the engine's budget is taken. At most kMaxTunedRows rows are timed.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/gemm.h"

namespace mosaic::cuda {

// Rows of the first call that tuning times (the rest of a larger call is not needed to rank
// algorithms: at 32k rows a 128 x 256 tile already makes ~30 waves).
inline constexpr int64_t kMaxTunedRows = 32768;

// What tuning saw for one pinned shape (Gemm::tuning_records, and one info-level log line).
struct GemmTuningRecord {
  int64_t m = 0, n = 0, k = 0;  // m: rows timed
  DType c_dtype = DType::bf16;
  bool bias = false, accumulate = false;
  // Per candidate in the heuristic's order: whether it ran this call, whether its output equalled
  // candidate 0's, and ms per call (the best of the rounds; timed only when both hold, else -1).
  std::vector<bool> ran, same_bits;
  std::vector<double> ms;
  size_t chosen = 0;
  double reference_call_ms = 0;  // one call of the reference (candidate 0)
  bool timed = false;            // false: the reference was kept untimed (short, or could not run)
  double tuning_ms = 0;          // host wall time the tuning took
};

// One cuBLASLt algorithm. (A named wrapper: nvcc 13's front end fails on std::vector of
// cuBLASLt's typedef'd anonymous struct.)
struct GemmAlgorithm {
  cublasLtMatmulAlgo_t value;
};

struct TuningCall {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;  // with the bias pointer already set, if any
  GemmArgs args;                        // the real call: operands, strides, accumulate
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
  double min_call_ms = 0;  // GemmTuning::min_call_ms
};

// Whether tuning may run on this stream now (not while it is being captured into a graph).
bool tuning_possible(cudaStream_t stream);

// Times `candidates` (candidates[0] is the reference for bit equality) on the call and returns
// the record; `chosen` is the fastest bit-identical candidate, candidate 0 unless another is at
// least kTuningMargin faster, or when one call of the reference takes less than min_call_ms. Leaves C as the call found it when the call
// accumulates; otherwise C holds some candidate's (identical) product.
GemmTuningRecord tune_gemm(const TuningCall& call, std::span<const GemmAlgorithm> candidates);

// One info-level log line for the record (MOSAIC_LOG=info): each candidate's time ("differs" =
// not bit-identical, "-" = could not run this call), the chosen one in brackets.
void log_tuning(const GemmTuningRecord& record);

// The smallest gain that moves the pin away from the heuristic's first choice.
inline constexpr double kTuningMargin = 0.01;

}  // namespace mosaic::cuda
