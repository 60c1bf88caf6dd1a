// The graph registrar: one template per model family, instantiated for a step's shape.
//
//   Graph g = instantiate_step_graph(config, {.lengths = {4096}, .candidates = {2048}},
//                                    ChunkConfig{}, {.activations = DType::bf16});
//
// LLaDA and Dream share the dense pre-norm decoder template (their differences — q/k/v biases,
// GQA ratio, Dream's logit shift — are parameters or live in batch packing); LLaDA-MoE gets its
// own template with its issue.
#pragma once

#include "graph/graph.h"
#include "graph/step_shape.h"
#include "model/config.h"

namespace mosaic {

// Throws mosaic::Error for a shape without sequences, a sequence of length <= 0, or candidate
// counts that do not match the sequences or exceed their lengths (instantiate_step_graph checks
// these first; a caller that reads the counts before instantiating checks them with it).
void check_step_lengths(const StepShape& shape);

// Throws mosaic::Error for an impossible shape (empty batch, a sequence of length <= 0, more
// candidates than tokens, chunk counts < 1, a cache view or block layout that does not match).
Graph instantiate_step_graph(const ModelConfig& config, const StepShape& shape,
                             const ChunkConfig& chunks, const GraphOptions& options);

// The templates for LLaDA and Dream: the full step, and the cached step (shape.is_cached()).
Graph build_dense_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                const ChunkConfig& chunks, const GraphOptions& options);
Graph build_cached_decoder_graph(const ModelConfig& config, const StepShape& shape,
                                 const ChunkConfig& chunks, const GraphOptions& options);

}  // namespace mosaic
