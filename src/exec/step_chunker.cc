#include "exec/step_chunker.h"

#include <algorithm>

#include "core/error.h"
#include "core/format_bytes.h"
#include "plan/step_planner.h"

namespace mosaic {

ChunkConfig StepChunker::chunks_for(const StepShape& shape, const GraphOptions& options,
                                    std::optional<uint64_t> activation_budget) {
  if (!activation_budget) {
    ChunkConfig unchunked;
    unchunked.residual_in_host = residual_ == ResidualPlacement::host;
    return unchunked;
  }
  const uint64_t budget = *activation_budget;
  const int64_t tokens = bucket_rows(shape.tokens());
  const int64_t candidates = std::min(bucket_rows(shape.total_candidates()), tokens);
  const auto key = std::make_tuple(tokens, candidates, static_cast<int>(options.head), shape.is_cached());
  if (const auto found = found_.find(key); found != found_.end()) {
    const Found& f = found->second;
    const bool unchunked = f.chunks == ChunkConfig{};  // x on the device too: nothing to gain
    if (f.planned_peak <= budget && (unchunked || budget <= f.budget)) return f.chunks;
  }
  ChunkSearchRequest request;
  request.shape = bucket_shape(tokens, candidates, shape.is_cached(), shape.page_rows);
  request.options = options;
  request.activation_budget = budget;
  request.granule = granule_;
  request.residual = residual_;
  const ChunkSearchResult result = search_chunks(config_, request);
  if (!result.fits && result.floor > budget)
    fail("a step of {} tokens and {} candidate rows needs at least {} of activations; the budget "
         "leaves {}",
         shape.tokens(), shape.total_candidates(), format_bytes(result.floor), format_bytes(budget));
  if (!result.fits)  // the floor fits, the placement does not: say so, not "needs at least"
    fail("a step of {} tokens and {} candidate rows does not fit the {} of activations the budget "
         "leaves: chunked as far as it goes its live bytes peak at {}, but no chunking found packs "
         "its tensors into that many {} pages",
         shape.tokens(), shape.total_candidates(), format_bytes(budget), format_bytes(result.floor),
         format_bytes(granule_));
  found_[key] = {result.chunks, result.planned_peak, budget};
  return result.chunks;
}

StepShape step_shape_of(const ModelConfig& config, std::span<const SequenceRows> sequences) {
  StepShape shape;
  bool block_causal = false;
  for (const SequenceRows& sequence : sequences) block_causal = block_causal || sequence.layout.block_causal();
  for (const SequenceRows& sequence : sequences) {
    shape.lengths.push_back(sequence.computed_rows());
    shape.candidates.push_back(static_cast<int64_t>(sequence.rows.size()));
    if (!block_causal) continue;
    shape.layouts.push_back(sequence.layout);
    for (const int32_t row : sequence.rows)
      shape.candidate_positions.push_back(config.shifted_logits() ? std::max<int64_t>(row - 1, 0) : row);
  }
  return shape;
}

}  // namespace mosaic
