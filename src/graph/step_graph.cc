#include "graph/step_graph.h"

#include "core/error.h"

namespace mosaic {

Graph instantiate_step_graph(const ModelConfig& config, const StepShape& shape,
                             const ChunkConfig& chunks, const GraphOptions& options) {
  if (shape.lengths.empty()) fail("the step has no sequences");
  if (shape.candidates.size() != shape.lengths.size())
    fail("{} candidate counts for {} sequences", shape.candidates.size(), shape.lengths.size());
  for (size_t i = 0; i < shape.lengths.size(); ++i) {
    if (shape.lengths[i] <= 0) fail("sequence {} has length {}; it must be positive", i, shape.lengths[i]);
    if (shape.candidates[i] < 0 || shape.candidates[i] > shape.lengths[i])
      fail("sequence {}: {} candidate rows for {} tokens (need 0 <= M <= L)", i,
           shape.candidates[i], shape.lengths[i]);
  }
  for (const int64_t count : {chunks.qkv, chunks.attention, chunks.ffn, chunks.head})
    if (count < 1) fail("chunk counts must be at least 1 ({})", chunks.to_string());
  switch (config.family) {
    case Family::llada:
    case Family::dream: return build_dense_decoder_graph(config, shape, chunks, options);
    case Family::llada_moe: break;
  }
  fail("no step graph template for family {}", family_name(config.family));
}

}  // namespace mosaic
