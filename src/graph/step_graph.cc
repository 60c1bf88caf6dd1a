#include "graph/step_graph.h"

#include "core/error.h"
#include "model/tensor_parallel.h"
#include "graph/context_parallel.h"
#include "graph/residual_staging.h"
#include "graph/tensor_parallel.h"
#include "graph/weight_staging.h"

namespace mosaic {

void check_step_lengths(const StepShape& shape) {
  if (shape.lengths.empty()) fail("the step has no sequences");
  if (shape.candidates.size() != shape.lengths.size())
    fail("{} candidate counts for {} sequences", shape.candidates.size(), shape.lengths.size());
  for (size_t i = 0; i < shape.lengths.size(); ++i) {
    if (shape.lengths[i] <= 0) fail("sequence {} has length {}; it must be positive", i, shape.lengths[i]);
    if (shape.candidates[i] < 0 || shape.candidates[i] > shape.lengths[i])
      fail("sequence {}: {} candidate rows for {} tokens (need 0 <= M <= L)", i,
           shape.candidates[i], shape.lengths[i]);
  }
}

Graph instantiate_step_graph(const ModelConfig& config, const StepShape& shape,
                             const ChunkConfig& chunks, const GraphOptions& options) {
  check_step_lengths(shape);
  // Positions first, so that no size below can overflow (kMaxStepPositions).
  int64_t positions = 0;
  for (size_t i = 0; i < shape.lengths.size(); ++i) {
    const int64_t keys = shape.is_cached() && i < shape.cached.size() ? shape.cached[i].keys : shape.lengths[i];
    if (keys > kMaxStepPositions - positions)
      fail("the step holds more than {} positions (sequence {} has {}): positions are 32-bit", kMaxStepPositions, i,
           keys);
    positions += keys;
  }
  for (const int64_t count : {chunks.qkv, chunks.attention, chunks.ffn, chunks.head})
    if (count < 1 || count > kMaxChunksPerGroup)
      fail("chunk counts must be between 1 and {} ({})", kMaxChunksPerGroup, chunks.to_string());
  const size_t batch = shape.lengths.size();
  if (!shape.layouts.empty()) {
    if (shape.layouts.size() != batch) fail("{} block layouts for {} sequences", shape.layouts.size(), batch);
    for (size_t i = 0; i < batch; ++i) {
      const BlockLayout& layout = shape.layouts[i];
      const int64_t keys = shape.is_cached() ? shape.cached[i].keys : shape.lengths[i];
      if (layout.block_causal() && (layout.block <= 0 || layout.length != keys || layout.prompt < 0 ||
                                    layout.prompt > keys))
        fail("sequence {}: block layout (prompt {}, block {}, length {}) does not fit its {} positions", i,
             layout.prompt, layout.block, layout.length, keys);
    }
    if (shape.block_causal() && static_cast<int64_t>(shape.candidate_positions.size()) != shape.total_candidates())
      fail("{} candidate positions for {} candidate rows", shape.candidate_positions.size(), shape.total_candidates());
  }
  if (shape.is_cached()) {
    if (shape.cached.size() != batch) fail("{} cache views for {} sequences", shape.cached.size(), batch);
    if (shape.page_rows <= 0) fail("cache pages of {} positions", shape.page_rows);
    for (size_t i = 0; i < batch; ++i) {
      const CachedSequence& view = shape.cached[i];
      if (view.begin < 0 || view.begin + shape.lengths[i] > view.keys)
        fail("sequence {}: computed rows [{}, {}) outside its {} positions", i, view.begin,
             view.begin + shape.lengths[i], view.keys);
      if (static_cast<int64_t>(view.pages.size()) * shape.page_rows < view.keys)
        fail("sequence {}: {} cache pages of {} positions cannot hold {} positions", i, view.pages.size(),
             shape.page_rows, view.keys);
    }
  }
  switch (config.family) {
    case Family::llada:
    case Family::dream:
    case Family::llada_moe:
    case Family::llada2: {
      // Under tensor parallelism the template runs over one rank's shard (model/tensor_parallel.h).
      const int64_t ranks = options.tensor_parallel;
      const ModelConfig rank_config = ranks == 1 ? config : tensor_parallel_config(config, ranks);
      if (ranks > 1 && chunks.residual_in_host)
        fail("tensor parallelism over {} ranks with the residual stream in host memory: not supported (each rank "
             "holds its residual rows on its device)", ranks);
      if (options.context_parallel > 1 && (ranks > 1 || chunks.residual_in_host || config.experts > 0))
        fail("context parallelism over {} ranks {}: not supported yet", options.context_parallel,
             ranks > 1 ? "with tensor parallelism" : chunks.residual_in_host ? "with the residual stream in host memory"
                                                                              : "of a mixture-of-experts model");
      Graph graph = options.context_parallel > 1 ? build_context_parallel_decoder_graph(config, shape, chunks, options)
                    : shape.is_cached()          ? build_cached_decoder_graph(rank_config, shape, chunks, options)
                                                 : build_dense_decoder_graph(rank_config, shape, chunks, options);
      graph = insert_tensor_parallel_collectives(graph, ranks);
      if (chunks.residual_in_host) graph = stage_residual_rows(graph);
      if (options.streamed_layers.empty()) return graph;
      return stage_layer_weights(graph, rank_config, options.streamed_layers, options.staged_weight_bytes);
    }
  }
  fail("no step graph template for family {}", family_name(config.family));
}

}  // namespace mosaic
