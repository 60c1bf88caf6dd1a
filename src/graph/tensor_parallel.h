// One rank's step graph under tensor parallelism (docs/design/tensor-parallel.md). The template
// is built over the rank's shard of the model (model/tensor_parallel.h: fewer heads, a narrower
// FFN, a slice of the vocabulary); this pass adds the collectives that make its results the
// model's:
//
//   x = embed(ids)            each rank writes the rows of its own ids, zeros elsewhere;
//                             all_reduce(x) then holds every row
//   x[R] += a Wo^T            the projection writes partial[R] = a Wo_r^T instead, then
//   x[R] += h Wd^T            all_reduce(accumulate): x[R] += sum over ranks of partial[R]
//   stats[C] = head(h)        the fused head writes the rank's summaries over its vocabulary
//                             (head_partials[C]); combine_head_stats reduces them to stats[C]
//
// Materialised logits stay each rank's [candidates, V / R] columns: the runner puts them side by
// side. Every rank's graph is the same (only its weights and its vocabulary offset differ), so one
// plan serves them all.
#pragma once

#include "graph/graph.h"

namespace mosaic {

// `graph` built from the shard config for `ranks` ranks, with its collectives. ranks == 1: the
// graph unchanged. Asserts on an op the pass cannot split (an expert combine).
Graph insert_tensor_parallel_collectives(const Graph& graph, int64_t ranks);

}  // namespace mosaic
