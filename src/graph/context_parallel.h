// Context parallelism over R ranks (docs/design/context-parallel.md): the packed rows of a step
// split across ranks, each computing its rows through every layer against every rank's keys.
//
//   rank r holds packed rows [r S, r S + S), S = ceil(T / R); rows at or past T are ghost rows
//   (id 0, position 0), computed and never read, so that every rank's tensors and collectives
//   have the same size
//   per layer:  K_r, V_r = its rows' keys and values (norm, projection, RoPE)
//               K, V = all_gather_rows(K_r), all_gather_rows(V_r)    [R S, kv_dim], packed order
//               its rows' queries attend to K, V over their sequences' key ranges
//               FFN over its rows
//   head:       over the candidates whose rows it holds (the runner puts every rank's back in order)
//
// The rank's StepShape is the batch's (lengths, layouts) with the rank's own candidates: per
// sequence the count of its candidates whose rows lie on the rank, their positions in order.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "graph/step_shape.h"
#include "model/config.h"

namespace mosaic {

// S: the rows every rank holds for a step of `tokens` packed rows.
inline int64_t context_parallel_rows(int64_t tokens, int64_t ranks) { return (tokens + ranks - 1) / ranks; }

// Rank options.context_rank's step graph (options.context_parallel > 1). Throws mosaic::Error for a
// cached step (not supported yet) or a rank outside [0, ranks).
Graph build_context_parallel_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                           const ChunkConfig& chunks, const GraphOptions& options);

}  // namespace mosaic
