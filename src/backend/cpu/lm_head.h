// The fused mask-only LM head on the CPU: for each candidate row h[r], stream the vocabulary in
// fixed tiles of kLmHeadVocabTile columns, computing one tile of logits h[r] W^T at a time, and
// keep per row only what the samplers need (docs/design/sampling.md, "The fused head"). The
// [rows, vocab] logits are never stored.
//
// Per row, kLmHeadStats fp32 values in this order:
//   0 chosen token x0: argmax of l_v (greedy) or of l_v / T + gumbel(v, position, step),
//     over ids not in choice_bans (lowest id among equal scores)
//   1 l[x0] * stats_scale
//   2 max of l * stats_scale over the stats set (ids not in stats_bans)
//   3 its id (lowest among ties)
//   4 log-sum-exp of l * stats_scale over the stats set
//   5 sum over the stats set of p_v * l_v * stats_scale, p = softmax(l * stats_scale)
//   6 second-largest l * stats_scale in the stats set, 7 its id (-1 if none)
// Confidence of x0 = exp(col1 - col4) when x0 is in the stats set; negative entropy =
// col5 - col4; top-2 margin = exp(col2 - col4) - exp(col6 - col4).
//
// Each logit is the same fp32 value gemm_nt gives (column tiles are bit-exact), noise is
// addressed by (seed, vocab id, position, step), and running sums fold tile by tile in a fixed
// order, so results do not depend on how rows are chunked or batched.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/head_sampling.h"

namespace mosaic::cpu {

inline constexpr int64_t kLmHeadVocabTile = 2048;
inline constexpr int64_t kLmHeadStats = kHeadStatCount;
using mosaic::HeadRowSampling;

// `sampling` holds one entry per row, or is null for greedy rows with raw statistics.
void lm_head_sample(int64_t rows, int64_t hidden, const float* h, int64_t h_stride,
                    const void* weight, DType weight_dtype, int64_t vocab,
                    const HeadRowSampling* sampling, float* out, int64_t out_stride);

// One tensor-parallel rank's share (model/tensor_parallel.h): `weight` holds the vocabulary rows
// [vocab_begin, vocab_begin + vocab), ids, bans and noise are global, and each row gets
// kHeadPartialCount values: the statistics above over its ids, then the chosen token's score
// (-inf, chosen -1, when every id of the share is banned), for core/head_stats_combine.h.
void lm_head_sample_share(int64_t rows, int64_t hidden, const float* h, int64_t h_stride,
                          const void* weight, DType weight_dtype, int64_t vocab_begin, int64_t vocab,
                          const HeadRowSampling* sampling, float* out, int64_t out_stride);

}  // namespace mosaic::cpu
