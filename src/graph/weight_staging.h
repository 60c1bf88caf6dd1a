// Streamed layer weights (issue 26, "one plan over two memories"): a layer whose product weights
// live in host memory gets a staged_weights tensor in the step's arena, written by a
// stage_weights op one layer ahead of use and read by the layer's products. The planner places it
// with every other tensor, so two layers' staged weights are live at once (the one computing, the
// one arriving) and the step's peak counts them. docs/design/weight-staging.md.
//
// A pass over any template's graph (dense, cached, MoE): it copies the graph's tensors and ops,
// adds the staging ops and tensors, and points each product of a streamed layer at its staged
// weights. Norm weights and biases stay resident (kilobytes).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "model/config.h"

namespace mosaic {

// Staged weights start at multiples of this many bytes (the GPU's products and TMA want 128;
// 256 matches the resident weights' alignment).
inline constexpr uint64_t kStagedWeightAlign = 256;

// One product weight of a staged layer: [n, k] elements at `offset` bytes into the layer's
// staged_weights tensor (expert -1: a dense weight).
struct StagedWeight {
  WeightRole role = WeightRole::q;
  int32_t expert = -1;
  int64_t n = 0, k = 0;
  uint64_t offset = 0;
};

struct StagedLayer {
  int32_t layer = -1;
  std::vector<StagedWeight> weights;  // in the weight table's order
  uint64_t bytes = 0;                 // the staged tensor's size

  // The weight of `role` (and `expert`); throws mosaic::Error when the layer stages none.
  const StagedWeight& find(WeightRole role, int32_t expert = -1) const;
};

// Every decoder layer's product weights as staged, indexed by layer, `element_bytes` per
// element, from one pass over the weight table (model/weight_names.h): one layout per model,
// whatever graph stages it, so that a layer's host copy can be moved in one piece. Each tensor
// starts at an aligned offset; LLaDA 2.x's fused qkv is staged whole, q, k and v its row blocks
// (as the resident views are).
std::vector<StagedLayer> staged_layers(const ModelConfig& config, size_t element_bytes);

// The last `count` decoder layers: the ones streamed, by `mosaic plan --weights` and by
// EngineOptions::streamed_layers alike. Throws mosaic::Error for a count outside 0 .. layers.
std::vector<int32_t> last_layers(const ModelConfig& config, int64_t count);

// `graph` with the product weights of `layers` staged: per streamed layer l, a staged_weights
// tensor written by a stage_weights op placed before the first op of layer l - `prefetch`
// (before op 0 for the first layers) and read by layer l's linear and expert_linear ops through
// GraphOp::staged. `layers` empty: the graph unchanged. Throws mosaic::Error for a layer the
// model does not have.
Graph stage_layer_weights(const Graph& graph, const ModelConfig& config, std::span<const int32_t> layers,
                          size_t element_bytes, int32_t prefetch = 1);

}  // namespace mosaic
