// The fused mask-only LM head on the CPU: for each candidate row h[r], stream the vocabulary in
// fixed tiles of kLmHeadVocabTile columns, computing one tile of logits h[r] W^T at a time, and
// keep per row only what samplers need. The [rows, vocab] logits are never stored.
//
// Per row (fp32 out, kHeadStatsCols = 6 values, in this order):
//   max logit, argmax (lowest id among equal maxima), log-sum-exp, sum_v p_v * logit_v,
//   second-largest logit, its id (lowest id among ties; -1 when vocab == 1).
// Entropy = logsumexp - sum p * logit; softmax confidence of the argmax = exp(max - logsumexp).
//
// Each logit is the same fp32 value gemm_nt gives (column tiles are bit-exact), and the
// running sums are folded tile by tile in a fixed order with a fixed tile size, so results do
// not depend on how rows are chunked or batched.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace mosaic::cpu {

inline constexpr int64_t kLmHeadVocabTile = 2048;
inline constexpr int64_t kLmHeadStats = 6;

void lm_head_stats(int64_t rows, int64_t hidden, const float* h, int64_t h_stride,
                   const void* weight, DType weight_dtype, int64_t vocab, float* stats,
                   int64_t stats_stride);

}  // namespace mosaic::cpu
