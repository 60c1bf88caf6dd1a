// fp32 kernels of the mixture-of-experts FFN (graph/moe_ffn.h): routing, the permutation of rows
// by expert, and the weighted combine of the experts' outputs. The expert products themselves
// are gemm_nt calls over each expert's run of permuted rows.
#pragma once

#include <cstdint>

namespace mosaic::cpu {

// Per row: the k experts of highest softmax probability over `experts` router logits (fp32;
// equal probabilities: the lower expert first), written in ascending expert order with their
// probabilities (not renormalised). logits [rows, experts] (row stride logits_stride);
// route_experts i32 and route_weights f32 [rows, k], contiguous.
void moe_route(int64_t rows, int64_t experts, int64_t k, const float* logits, int64_t logits_stride,
               int32_t* route_experts, float* route_weights);

// Groups the rows' (row, expert) pairs by expert, rows ascending within an expert:
// expert_rows[e] (e = 0 .. experts) is expert e's first permuted row (expert_rows[experts] =
// rows k), expert_rows[experts + 1 + p] the source row of permuted row p, and route_slots[r, j]
// the permuted row of row r's j-th expert.
void moe_permute(int64_t rows, int64_t experts, int64_t k, const int32_t* route_experts,
                 int32_t* expert_rows, int32_t* route_slots);

// x[r, :] += sum over j (in order) of route_weights[r, j] * y[route_slots[r, j], :].
void moe_combine(int64_t rows, int64_t hidden, int64_t k, float* x, int64_t x_stride, const float* y,
                 int64_t y_stride, const float* route_weights, const int32_t* route_slots);

}  // namespace mosaic::cpu
