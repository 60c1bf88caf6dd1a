#include "exec/step_chunker.h"

#include <algorithm>

#include "core/error.h"
#include "core/format_bytes.h"
#include "plan/step_planner.h"

namespace mosaic {

ChunkConfig StepChunker::chunks_for(const StepShape& shape, const GraphOptions& options) {
  if (!budget_) return {};
  const int64_t tokens = bucket_rows(shape.tokens());
  const int64_t candidates = std::min(bucket_rows(shape.total_candidates()), tokens);
  const auto key = std::make_tuple(tokens, candidates, static_cast<int>(options.head));
  if (const auto found = cache_.find(key); found != cache_.end()) return found->second;
  ChunkSearchRequest request;
  request.shape = StepShape{{tokens}, {candidates}};
  request.options = options;
  request.activation_budget = *budget_;
  request.granule = granule_;
  const ChunkSearchResult result = search_chunks(config_, request);
  if (!result.fits && result.floor > *budget_)
    fail("a step of {} tokens and {} candidate rows needs at least {} of activations; the budget "
         "leaves {}",
         shape.tokens(), shape.total_candidates(), format_bytes(result.floor), format_bytes(*budget_));
  if (!result.fits)  // the floor fits, the placement does not: say so, not "needs at least"
    fail("a step of {} tokens and {} candidate rows does not fit the {} of activations the budget "
         "leaves: chunked as far as it goes its live bytes peak at {}, but no chunking found packs "
         "its tensors into that many {} pages",
         shape.tokens(), shape.total_candidates(), format_bytes(*budget_), format_bytes(result.floor),
         format_bytes(granule_));
  return cache_.emplace(key, result.chunks).first->second;
}

StepShape step_shape_of(std::span<const SequenceRows> sequences) {
  StepShape shape;
  for (const SequenceRows& sequence : sequences) {
    shape.lengths.push_back(static_cast<int64_t>(sequence.ids.size()));
    shape.candidates.push_back(static_cast<int64_t>(sequence.rows.size()));
  }
  return shape;
}

}  // namespace mosaic
