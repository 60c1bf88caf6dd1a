// Commit on the device (docs/design/device-commit.md). Per sequence of a packed step, straight
// from the fused head's statistics (lm_head.h) where they already are:
//   1. each candidate row's token and confidence, by the formulas of gen/confidence.cc;
//   2. each row's rank among its sequence's rows: confidence highest first, equal confidences
//      the lower canvas position first (gen/position_select.h);
//   3. the sequence's rule: top-k (rank < k) or threshold (rank 0, or confidence >= threshold);
//   4. the committed rows' tokens written into the sequence's device canvas.
// Every row's outcome (token, committed flag, confidence) is written to `out`, the small result
// the host copies back to mirror the canvas. The selection is exact on the confidences it
// writes: a host that ranks those numbers with gen/position_select.h chooses the same rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/commit_rule.h"
#include "core/head_sampling.h"

namespace mosaic::cuda {

struct CommitSequence {
  int64_t row_begin = 0;      // its rows are [row_begin, row_begin + row_count) of the step's rows
  int64_t row_count = 0;
  int32_t* canvas = nullptr;  // device int32 [sequence length]: committed tokens are written here
  CommitRule rule;
};

struct CommitArgs {
  const float* stats = nullptr;  int64_t stats_stride = 0;  // device fp32 [rows, >= kHeadStatCount]
  // Device [rows]: a row's canvas position (`position`) and the ids left out of its statistics'
  // softmax (`stats_bans`, which zero the chosen token's probability).
  const HeadRowSampling* sampling = nullptr;
  const CommitSequence* sequences = nullptr;  // device [sequence_count]
  int64_t sequence_count = 0;
  CommittedRow* out = nullptr;                // device [rows]; rows of no listed sequence are left alone
};

void commit_rows(const CommitArgs& args, cudaStream_t stream);

}  // namespace mosaic::cuda
