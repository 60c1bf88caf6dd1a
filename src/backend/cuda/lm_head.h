// The fused mask-only LM head on the GPU: per candidate row, the logits h W^T (h bf16 [rows,
// hidden], W bf16 [vocab, hidden]) are computed tile by tile over the vocabulary and reduced on
// the fly into the kHeadStatCount values of core/head_sampling.h — the chosen token (greedy or
// Gumbel-max with the counter-based RNG of docs/design/rng.md), its logit, max/argmax,
// log-sum-exp, sum p*logit and the runner-up, over the row's choice and stats sets. No
// [rows, vocab] logits buffer exists; the only scratch is a small per-(row, vocab split) partial
// result that a second pass combines. Results equal the CPU kernel's (backend/cpu/lm_head.h)
// up to fp32/bf16 rounding of the logits, with ties to the lowest id.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/head_sampling.h"

namespace mosaic::cuda {

class Gemm;

struct LmHeadArgs {
  int64_t rows = 0, hidden = 0, vocab = 0;
  const void* h = nullptr;  int64_t h_stride = 0;  // bf16
  const void* weight = nullptr;                     // bf16 [vocab, hidden]
  const HeadRowSampling* sampling = nullptr;        // device array [rows], or null (greedy)
  float* out = nullptr;     int64_t out_stride = 0; // fp32 [rows, kHeadStatCount]
  void* scratch = nullptr;                          // lm_head_scratch_bytes(rows, vocab) bytes
  // Null: one fused kernel computes the logits tile by tile (mma.sync) and folds them. Set: the
  // logits of one chunk of the vocabulary at a time (lm_head_chunk_ids ids) come from this
  // cuBLASLt GEMM into fp32 scratch and are folded from there into one partial per (row, chunk) —
  // the same statistics, computed in a different order (so the last bits differ from the fused
  // path), much faster for many rows.
  // A caller must choose the path from something other than `rows` when it splits rows into
  // calls, or the calls would differ in the last bits from one whole call.
  Gemm* gemm = nullptr;
  // Every row's choice_inv_temperature is 0 (as with a null `sampling`): the cuBLASLt path then
  // folds with a kernel that has no noise and no double scores (the same bits, faster). A caller
  // that cannot say leaves it false.
  bool all_greedy = false;
};

// Scratch for either path: the per-(row, vocabulary split) partial results and one vocabulary
// chunk of fp32 logits per row.
uint64_t lm_head_scratch_bytes(int64_t rows, int64_t vocab);
int64_t lm_head_chunk_ids(int64_t vocab);
void lm_head_sample(const LmHeadArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
