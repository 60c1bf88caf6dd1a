#include "exec/context_parallel_batch.h"

#include "core/error.h"
#include "graph/context_parallel.h"

namespace mosaic {

std::vector<ContextParallelPart> split_for_context_parallel(const StepShape& shape, const PackedBatch& packed,
                                                            int64_t ranks) {
  MOSAIC_ASSERT(!shape.is_cached(), "a cached step split over ranks");
  const int64_t tokens = packed.tokens(), rows = context_parallel_rows(tokens, ranks);
  std::vector<ContextParallelPart> parts(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    ContextParallelPart& part = parts[static_cast<size_t>(r)];
    part.shape.lengths = shape.lengths;
    part.shape.layouts = shape.layouts;
    part.shape.candidates.assign(shape.lengths.size(), 0);
    PackedBatch& b = part.batch;
    b.offsets = {0, rows};
    for (int64_t i = r * rows; i < (r + 1) * rows; ++i) {
      const bool real = i < tokens;
      b.ids.push_back(real ? packed.ids[static_cast<size_t>(i)] : 0);
      b.positions.push_back(real ? packed.positions[static_cast<size_t>(i)] : 0);
    }
  }
  // Candidates in the batch's order: a sequence's are contiguous, sequence by sequence.
  int64_t candidate = 0;
  for (size_t s = 0; s < shape.candidates.size(); ++s)
    for (int64_t k = 0; k < shape.candidates[s]; ++k, ++candidate) {
      const int64_t row = packed.logit_rows[static_cast<size_t>(candidate)];
      ContextParallelPart& part = parts[static_cast<size_t>(row / rows)];
      ++part.shape.candidates[s];
      part.batch.logit_rows.push_back(static_cast<int32_t>(row % rows));
      part.candidates.push_back(candidate);
      if (!shape.candidate_positions.empty())
        part.shape.candidate_positions.push_back(shape.candidate_positions[static_cast<size_t>(candidate)]);
    }
  return parts;
}

}  // namespace mosaic
