// What a cached step needs of the KV cache's bookkeeping (docs/design/kv-cache.md): per sequence
// its cache view (the pages holding its canvas) in the step's shape, and per computed row the row
// of the cache its fresh K and V go to.
#pragma once

#include <span>

#include "cache/kv_page_pool.h"
#include "exec/forward_batch.h"
#include "graph/step_shape.h"

namespace mosaic {

// Fills shape.cached, shape.page_rows and packed.kv_rows for a batch whose every sequence is
// cached (SequenceRows::cached()) with pages held in `pool` covering its canvas. Throws
// mosaic::Error for a sequence the pool does not hold or whose pages are too few.
void add_cache_views(const KvPagePool& pool, std::span<const SequenceRows> sequences, StepShape& shape,
                     PackedBatch& packed);

}  // namespace mosaic
