// Commit on the device: one CTA per sequence (docs/design/device-commit.md).
//
// Ranking: a row's rank is the number of rows of its sequence that rank before it, counted
// against the sequence's rows streamed through shared memory in tiles of kThreads. Ranks are
// what a sort by (confidence desc, position asc) would give, so "rank < k" is exactly
// top_k_positions and "rank 0 or confidence >= threshold" exactly threshold_positions, with
// ties decided by the same comparison. Counting is O(n^2) per sequence, done by n threads: a
// block of a LLaDA step has tens of rows, a Dream step at most the generation length.
//
// Confidence: the formulas of gen/confidence.cc in double, with explicitly rounded
// subtractions. The device's double exp may differ from the host's in the last ulp, so the
// confidences are passed back and the host reports these numbers; the ranking depends on them
// alone, never on a value computed twice.
#include "backend/cuda/commit.h"

#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"

namespace mosaic::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ double row_confidence(const float* s, const HeadRowSampling& how,
                                                 ConfidenceKind kind, int32_t token) {
  const double lse = s[kHeadLogSumExp];
  switch (kind) {
    case ConfidenceKind::chosen_probability:
      if (token == how.stats_bans[0] || token == how.stats_bans[1]) return 0.0;
      return exp(__dsub_rn(static_cast<double>(s[kHeadChosenLogit]), lse));
    case ConfidenceKind::top2_margin: {
      const double second =
          s[kHeadSecondId] < 0 ? 0.0 : exp(__dsub_rn(static_cast<double>(s[kHeadSecond]), lse));
      return __dsub_rn(exp(__dsub_rn(static_cast<double>(s[kHeadMax]), lse)), second);
    }
    case ConfidenceKind::negative_entropy:
      return __dsub_rn(static_cast<double>(s[kHeadMeanLogit]), lse);
  }
  return 0.0;
}

// (confidence, position) ranks before (other_confidence, other_position): gen/position_select.cc.
__device__ __forceinline__ bool ranks_before(double confidence, int32_t position,
                                             double other_confidence, int32_t other_position) {
  return confidence > other_confidence ||
         (confidence == other_confidence && position < other_position);
}

__global__ void __launch_bounds__(kThreads) commit_kernel(const CommitArgs args) {
  const CommitSequence sequence = args.sequences[blockIdx.x];
  const int64_t n = sequence.row_count;
  const float* stats = args.stats + sequence.row_begin * args.stats_stride;
  const HeadRowSampling* sampling = args.sampling + sequence.row_begin;
  CommittedRow* out = args.out + sequence.row_begin;

  // 1. Token and confidence of every row.
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float* s = stats + i * args.stats_stride;
    const int32_t token = static_cast<int32_t>(s[kHeadChosen]);
    CommittedRow row;
    row.token = token;
    row.committed = 0;
    row.confidence = row_confidence(s, sampling[i], sequence.rule.confidence, token);
    out[i] = row;
  }
  __syncthreads();  // the block's global writes are visible to the whole block past this point

  // 2-4. Rank, rule, canvas. Every thread takes part in every tile (the barriers), rows or not.
  __shared__ double tile_confidence[kThreads];
  __shared__ int32_t tile_position[kThreads];
  const CommitRule rule = sequence.rule;
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const bool mine = i < n;
    const double confidence = mine ? out[i].confidence : 0.0;
    const int32_t position = mine ? static_cast<int32_t>(sampling[i].position) : 0;
    int64_t ahead = 0;  // rows that rank before row i
    for (int64_t tile = 0; tile < n; tile += kThreads) {
      __syncthreads();  // the previous tile has been read by everyone
      const int64_t j = tile + threadIdx.x;
      if (j < n) {
        tile_confidence[threadIdx.x] = out[j].confidence;
        tile_position[threadIdx.x] = static_cast<int32_t>(sampling[j].position);
      }
      __syncthreads();
      const int count = static_cast<int>(min(int64_t{kThreads}, n - tile));
      if (mine) {
        for (int t = 0; t < count; ++t)
          ahead += ranks_before(tile_confidence[t], tile_position[t], confidence, position);
      }
    }
    if (!mine) continue;
    bool commit = false;
    switch (rule.selection) {
      case CommitSelection::top_k: commit = ahead < rule.k; break;
      case CommitSelection::threshold: commit = ahead == 0 || confidence >= rule.threshold; break;
      case CommitSelection::top_k_or_above: commit = ahead < rule.k || confidence > rule.threshold; break;
    }
    if (commit) {
      out[i].committed = 1;
      sequence.canvas[position] = out[i].token;
    }
  }
}

[[noreturn]] void invalid_arguments(const char* what) {
  std::fprintf(stderr, "mosaic: internal error: cuda::commit_rows: %s\n", what);
  std::abort();
}

}  // namespace

void commit_rows(const CommitArgs& args, cudaStream_t stream) {
  if (args.sequence_count <= 0) return;
  if (args.stats == nullptr || args.sampling == nullptr || args.sequences == nullptr || args.out == nullptr)
    invalid_arguments("stats, sampling, sequences and out must be device arrays");
  if (args.stats_stride < kHeadStatCount) invalid_arguments("stats_stride < kHeadStatCount");
  if (args.sequence_count > 0x7fffffff) invalid_arguments("more than 2^31 - 1 sequences");
  commit_kernel<<<static_cast<unsigned>(args.sequence_count), kThreads, 0, stream>>>(args);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace mosaic::cuda
