// A step's packed batch cut into context-parallel ranks' parts (graph/context_parallel.h): rank r
// gets packed rows [r S, r S + S) (ghost rows with id 0 and position 0 past the batch's end) and
// the candidates whose rows it holds, with the StepShape its graph is instantiated for.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/forward_batch.h"
#include "graph/step_shape.h"

namespace mosaic {

struct ContextParallelPart {
  StepShape shape;                  // the batch's lengths and layouts; the rank's candidates only
  PackedBatch batch;                // its S rows, its candidates' rows in its own row numbers
  std::vector<int64_t> candidates;  // which of the batch's candidates (their order) it predicts
};

std::vector<ContextParallelPart> split_for_context_parallel(const StepShape& shape, const PackedBatch& packed,
                                                            int64_t ranks);

}  // namespace mosaic
