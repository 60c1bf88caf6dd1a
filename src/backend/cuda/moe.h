// bf16 kernels of the mixture-of-experts FFN (graph/moe_ffn.h; docs/design/moe.md): routing,
// the permutation of rows by expert, the grouped product over each expert's run of permuted
// rows, and the weighted combine. Each reads the routing from the device: no host sync, and a
// step's launches do not depend on what the router chose (CUDA graphs replay them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mosaic::cuda {

// The largest expert counts the kernels take (a model beyond them is refused before its first
// step, api/step_runner_factory.cc).
inline constexpr int64_t kMoeMaxExperts = 256, kMoeMaxExpertsPerToken = 32;

// Per row of bf16 router logits [rows, experts] (row stride logits_stride): the k experts of
// highest fp32 softmax probability (equal: the lower expert first), in ascending expert order,
// with their probabilities (not renormalised). route_experts i32, route_weights f32 [rows, k].
// experts <= 256, k <= 32 (kMoeMaxExperts, kMoeMaxExpertsPerToken).
void moe_route(int64_t rows, int64_t experts, int64_t k, const void* logits, int64_t logits_stride,
               int32_t* route_experts, float* route_weights, cudaStream_t stream);

// As cpu::moe_permute: expert_rows[0 .. experts] each expert's first permuted row, then
// expert_rows[experts + 1 + p] permuted row p's source row (rows ascending within an expert);
// route_slots[r, j] the permuted row of row r's j-th expert. One CTA.
void moe_permute(int64_t rows, int64_t experts, int64_t k, const int32_t* route_experts, int32_t* expert_rows,
                 int32_t* route_slots, cudaStream_t stream);

// out[p, :] = a[p, :] W_e^T for the permuted rows p in [offsets[e], offsets[e + 1]) of each expert
// e, W_e = weights[e] (device array of bf16 [n, k] row-major pointers); fp32 accumulation in a
// fixed order per output (a row's values do not depend on which other rows ran), bf16 out.
// max_rows bounds offsets[experts] (the grid is sized by it). k % 8 == 0, n % 2 == 0, lda and
// ldc multiples of 8, 16-byte aligned a and weights.
//
// Two kernels compute the same bits (each output's fp32 sum runs over K in 16-wide mma steps in
// ascending order from zero, whatever its tile): 128 x 128 tiles for many rows per expert, and
// 32 x 64 tiles with a deeper pipeline for few (a decoding step's 32 rows spread over hundreds
// of experts leave one 128-row tile per expert nearly empty and its K loop waiting on memory:
// docs/design/moe.md). `kernel` picks one; automatic takes the few-rows kernel when there are at
// most kFewRowsPerExpert rows per expert on average.
enum class ExpertGemmKernel : uint8_t { automatic, tiles, few_rows };
inline constexpr int64_t kFewRowsPerExpert = 32;
struct ExpertGemmArgs {
  int64_t max_rows = 0, n = 0, k = 0, experts = 0;
  const void* a = nullptr;  int64_t lda = 0;   // bf16
  const void* const* weights = nullptr;        // device [experts] pointers
  const int32_t* offsets = nullptr;            // device [experts + 1]
  void* out = nullptr;      int64_t ldc = 0;   // bf16
  ExpertGemmKernel kernel = ExpertGemmKernel::automatic;
  // A bound on any one expert's rows (0: max_rows): the rows routed from R rows that each take k
  // distinct experts give at most R to an expert. The few-rows kernel's grid is sized by it.
  int64_t max_rows_per_expert = 0;
};
void expert_gemm(const ExpertGemmArgs& args, cudaStream_t stream);

// x[r, :] = bf16(x[r, :] + bf16(sum over j, in order, of route_weights[r, j] * y[route_slots[r, j], :]))
// (x, y bf16; the sum in fp32).
void moe_combine(int64_t rows, int64_t hidden, int64_t k, void* x, int64_t x_stride, const void* y,
                 int64_t y_stride, const float* route_weights, const int32_t* route_slots, cudaStream_t stream);

}  // namespace mosaic::cuda
